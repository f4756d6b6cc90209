"""A host's quick start, as the README prints it: the first fenced block in
LANGUAGE of the README's "Use it" section, written to OUT.

    python3 quickstart.py README LANGUAGE OUT
"""

import re
import sys

readme, language, out = sys.argv[1:4]
text = open(readme, encoding="utf-8").read()
section = re.search(r"^## Use it\n(.*?)(?=^## )", text, re.S | re.M)
if section is None:
    sys.exit(f"{readme} has no 'Use it' section")
block = re.search(rf"^```{re.escape(language)}\n(.*?)^```", section.group(1), re.S | re.M)
if block is None:
    sys.exit(f"{readme}'s 'Use it' section has no {language} block")
lines = block.group(1).splitlines()
if len(lines) > 10:
    sys.exit(f"the {language} quick start is {len(lines)} lines; it must be ten or fewer")
open(out, "w", encoding="utf-8").write(block.group(1))
