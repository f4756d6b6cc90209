package dev.ctxkernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The kernel's compiled classes stay out of HotSpot's optimizing compiler
 * (tier 4) before JDK 25 unless {@code ctxkernel.jvm.c2} opts back in
 * ({@code Engine.keepOptimizingCompilerOff}). Each case runs the benchmark
 * in a fresh JVM that prints what it compiles, with plans enough to make the
 * kernel's methods hot, and counts the tiers its generated methods reached.
 */
class OptimizingCompilerTest {
    /** A {@code -XX:+PrintCompilation} line for one of Chicory's generated methods: its tier. */
    private static final Pattern GENERATED = Pattern.compile("^\\s*\\d+\\s+\\d+\\s+[%sbn! ]*([0-4])\\s+dev\\.ctxkernel\\.compiled\\.");

    @Test
    void theKernelsMethodsNeverReachTheOptimizingCompilerUnlessAskedTo() throws Exception {
        Path request = Files.createTempFile("ctxkernel-plan", ".json");
        try {
            ObjectNode plan = PlanWorkloads.planRequest(32_768);
            plan.putArray("items").addAll(PlanWorkloads.sessionItems(300));
            Files.writeString(request, Kernel.JSON.writeValueAsString(plan));
            Map<Integer, Integer> byDefault = tiers(request, List.of());
            if (Runtime.version().feature() < 25) {
                assertTrue(byDefault.getOrDefault(1, 0) > 0, "the generated methods are compiled by C1: " + byDefault);
                assertEquals(0, byDefault.getOrDefault(4, 0), "no generated method reaches C2: " + byDefault);
            } else {
                assertTrue(byDefault.getOrDefault(4, 0) > 0, "from JDK 25 the hot methods reach C2: " + byDefault);
            }

            Map<Integer, Integer> optedIn = tiers(request, List.of("-D" + Engine.OPTIMIZE_PROPERTY + "=true"));
            assertTrue(optedIn.getOrDefault(4, 0) > 0, "opted in, the hot methods reach C2: " + optedIn);
        } finally {
            Files.deleteIfExists(request);
        }
    }

    /** How many compilations of generated methods each tier made in a fresh JVM planning {@code request} 200 times. */
    private static Map<Integer, Integer> tiers(Path request, List<String> options) throws IOException, InterruptedException {
        String classpath = System.getProperty("java.class.path");
        List<String> command = new java.util.ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-XX:+PrintCompilation"));
        command.addAll(options);
        command.addAll(List.of("-cp", classpath, "dev.ctxkernel.Bench", "plan-context", request.toString(), "200"));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, process.waitFor(), output.lines().filter(l -> !GENERATED.matcher(l).find()).limit(40).toList().toString());
        Map<Integer, Integer> tiers = new TreeMap<>();
        for (String line : output.lines().toList()) {
            Matcher m = GENERATED.matcher(line);
            if (m.find() && !line.contains("made not entrant")) {
                tiers.merge(Integer.parseInt(m.group(1)), 1, Integer::sum);
            }
        }
        return tiers;
    }
}
