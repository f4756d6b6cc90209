package dev.ctxkernel;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.fasterxml.jackson.databind.node.TextNode;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Runs parity fixtures (tests/parity) against fresh SQLite stores and writes,
 * per fixture, a transcript of every step and a canonical dump of the final
 * store — the same bytes every host's runner writes.
 *
 * <p>Usage: {@code java dev.ctxkernel.Parity --out DIR FIXTURE.json...}
 */
public final class Parity {
    private Parity() {}

    public static void main(String[] args) throws Exception {
        Path out = null;
        Path read = null;
        List<Path> fixtures = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--out")) {
                out = Path.of(args[++i]);
            } else if (args[i].equals("--read")) {
                read = Path.of(args[++i]);
            } else {
                fixtures.add(Path.of(args[i]));
            }
        }
        if (out == null) {
            throw new IllegalArgumentException("usage: Parity --out DIR FIXTURE.json...");
        }
        Files.createDirectories(out);
        for (Path file : fixtures) {
            JsonNode fixture = Kernel.JSON.readTree(Files.readString(file));
            String name = fixture.get("name").asText();
            if (read != null) {
                // Another host wrote this store file: open it here, ask the kernel, dump it.
                String written = read.resolve(name + ".sqlite").toString();
                String info;
                try (SqliteStore store = new SqliteStore(written)) {
                    info = "{\"step\":0,\"ok\":" + new Kernel(store).call("info", "{\"schemaVersion\":1}") + "}";
                }
                Files.writeString(out.resolve(name + ".read.jsonl"), info + "\n" + dump(written));
                continue;
            }
            Path store = out.resolve(name + ".sqlite");
            for (String suffix : new String[] {"", "-wal", "-shm"}) {
                Files.deleteIfExists(Path.of(store + suffix));
            }
            Files.writeString(out.resolve(name + ".transcript.jsonl"), run(fixture, store.toString()));
            Files.writeString(out.resolve(name + ".dump.jsonl"), dump(store.toString()));
        }
    }

    private static String json(Object value) throws Exception {
        return Kernel.JSON.writeValueAsString(value);
    }

    /** A {@code $ref} that points at nothing: no such step, a step that answered with an error or was an action, or no such member. */
    private static final class Unresolved extends RuntimeException {
        final String reference;

        Unresolved(String reference) {
            super("$ref " + reference + " points at nothing");
            this.reference = reference;
        }
    }

    private static JsonNode resolve(JsonNode value, List<JsonNode> responses) {
        if (value.isArray()) {
            ArrayNode out = JsonNodeFactory.instance.arrayNode();
            value.forEach(v -> out.add(resolve(v, responses)));
            return out;
        }
        if (value.isObject()) {
            if (value.has("$ref")) {
                String reference = value.get("$ref").isTextual() ? value.get("$ref").asText() : "";
                String[] ref = reference.split("#", 2);
                if (ref.length < 2 || !ref[0].matches("[0-9]+") || (!ref[1].isEmpty() && !ref[1].startsWith("/"))) {
                    throw new Unresolved(reference);
                }
                String digits = ref[0].replaceFirst("^0+(?=.)", "");
                int step = digits.length() > 9 ? Integer.MAX_VALUE : Integer.parseInt(digits);
                JsonNode response = step < responses.size() ? responses.get(step) : null;
                JsonNode found;
                try {
                    found = response == null ? null : response.at(ref[1]);
                } catch (IllegalArgumentException e) {
                    found = null;
                }
                if (found == null || found.isMissingNode()) {
                    throw new Unresolved(reference);
                }
                if (value.path("format").isTextual()) {
                    // Only a string is a format; every `{}` of it is filled.
                    return TextNode.valueOf(value.get("format").asText().replace("{}", found.isTextual() ? found.asText() : found.toString()));
                }
                return found;
            }
            ObjectNode out = JsonNodeFactory.instance.objectNode();
            value.fields().forEachRemaining(e -> out.set(e.getKey(), resolve(e.getValue(), responses)));
            return out;
        }
        return value;
    }

    private static byte[] content(JsonNode spec) {
        if (spec.has("text")) {
            return spec.get("text").asText().getBytes(StandardCharsets.UTF_8);
        }
        JsonNode repeat = spec.get("repeat");
        return repeat.get("text").asText().repeat(repeat.get("times").asInt()).getBytes(StandardCharsets.UTF_8);
    }

    private static String run(JsonNode fixture, String path) throws Exception {
        Map<String, Kernel> instances = new LinkedHashMap<>();
        Map<String, SqliteStore> stores = new HashMap<>();
        List<JsonNode> responses = new ArrayList<>();
        Map<String, byte[]> saved = new HashMap<>();
        StringBuilder lines = new StringBuilder();
        int i = 0;
        for (JsonNode step : fixture.get("steps")) {
            String name = step.has("instance") ? step.get("instance").asText() : "a";
            // A step whose reference points at nothing is written down as such; the steps after it still run.
            JsonNode resolved;
            try {
                resolved = step.has("action") ? (step.has("key") ? resolve(step.get("key"), responses) : null) : resolve(step.get("request"), responses);
            } catch (Unresolved e) {
                responses.add(null);
                lines.append("{\"step\":").append(i).append(",\"unresolved\":").append(json(e.reference)).append("}\n");
                i++;
                continue;
            }
            if (step.has("action")) {
                String action = step.get("action").asText();
                try (SqliteStore raw = new SqliteStore(path)) {
                    String key = resolved == null ? null : resolved.asText();
                    switch (action) {
                        case "reload" -> {
                            instances.remove(name);
                            SqliteStore old = stores.remove(name);
                            if (old != null) {
                                old.close();
                            }
                        }
                        case "corrupt" -> {
                            byte[] value = raw.get(key).value().clone();
                            value[step.path("offset").asInt(0) % Math.max(value.length, 1)] ^= 0x01;
                            raw.put(key, value, null);
                        }
                        case "replace" -> {
                            String text = new String(raw.get(key).value(), StandardCharsets.UTF_8);
                            String find = step.get("find").asText();
                            int at = text.indexOf(find);
                            String replaced = at < 0 ? text : text.substring(0, at) + step.get("with").asText() + text.substring(at + find.length());
                            raw.put(key, replaced.getBytes(StandardCharsets.UTF_8), null);
                        }
                        case "write" -> raw.put(key, step.path("text").asText("").getBytes(StandardCharsets.UTF_8), null);
                        case "remove" -> raw.remove(key, null);
                        case "snapshot" -> {
                            Store.Entry entry = raw.get(key);
                            saved.put(step.get("as").asText(), entry == null ? new byte[0] : entry.value());
                        }
                        case "restore" -> raw.put(key, saved.getOrDefault(step.get("from").asText(), new byte[0]), null);
                        default -> throw new IllegalArgumentException("step " + i + ": unknown action " + action);
                    }
                }
                responses.add(null);
                lines.append("{\"step\":").append(i).append(",\"action\":").append(json(action)).append("}\n");
                i++;
                continue;
            }
            String request = resolved.isTextual() ? resolved.asText() : json(resolved);
            Kernel kernel = instances.get(name);
            if (kernel == null) {
                SqliteStore store = new SqliteStore(path);
                stores.put(name, store);
                kernel = new Kernel(store);
                instances.put(name, kernel);
            }
            String command = step.get("command").asText();
            // The kernel's JSON goes into the transcript verbatim, never parsed and written again.
            String line;
            try {
                line = switch (command) {
                    case "put-content" -> "{\"step\":" + i + ",\"ok\":" + kernel.call(command, request, content(step.get("content"))) + "}";
                    case "get-content" -> {
                        byte[] bytes = kernel.getContent(request);
                        yield "{\"step\":" + i + ",\"bytes\":{\"length\":" + bytes.length + ",\"sha256\":\"" + ComponentBinary.sha256(bytes) + "\"}}";
                    }
                    default -> "{\"step\":" + i + ",\"ok\":" + kernel.call(command, request) + "}";
                };
            } catch (KernelException e) {
                String message = e.getMessage();
                line = "{\"step\":" + i + ",\"error\":{\"code\":\"" + e.code().wireName() + "\",\"detail\":" + e.detailJson()
                        + ",\"message\":" + json(message) + "}}";
            }
            responses.add(Kernel.JSON.readTree(line).get("ok"));
            lines.append(line).append('\n');
            i++;
        }
        for (SqliteStore store : stores.values()) {
            store.close();
        }
        return lines.toString();
    }

    private static String dump(String path) throws Exception {
        StringBuilder out = new StringBuilder();
        try (SqliteStore store = new SqliteStore(path)) {
            String after = "";
            while (true) {
                List<Store.Entry> page = store.scan("", after, 1000);
                for (Store.Entry e : page) {
                    out.append("{\"key\":").append(json(e.key())).append(",\"revision\":").append(e.revision())
                            .append(",\"sha256\":\"").append(ComponentBinary.sha256(e.value())).append("\"}\n");
                }
                if (page.size() < 1000) {
                    return out.toString();
                }
                after = page.get(page.size() - 1).key();
            }
        }
    }
}
