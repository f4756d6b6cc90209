package smoke;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.ctxkernel.Kernel;
import dev.ctxkernel.SqliteStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** The scenario through the installed jar: {@code java smoke.Smoke SCENARIO OUT STORE}. */
public final class Smoke {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        Kernel kernel = new Kernel(new SqliteStore(args[2]));
        List<String> lines = new ArrayList<>(List.of(Kernel.componentSha256()));
        String previous = "";
        for (var step : json.readTree(Path.of(args[0]).toFile()).get("steps")) {
            ObjectNode request = (ObjectNode) step.get("request");
            String command = step.get("command").asText();
            if (command.equals("decide-memory")) {
                request.set("memoryId", json.readTree(previous).at("/receipts/0/memory/memoryId"));
            }
            previous = kernel.call(command, json.writeValueAsString(request));
            lines.add(previous);
        }
        Files.writeString(Path.of(args[1]), String.join("\n", lines) + "\n");
    }
}
