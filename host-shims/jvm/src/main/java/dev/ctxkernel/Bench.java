package dev.ctxkernel;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Times one kernel command on this host, for the cross-host table in
 * docs/BENCHMARKS.md: a fresh in-memory kernel, warm-up calls (a fifth of
 * the iterations, at least three), then
 * ITERATIONS timed calls of COMMAND with the request in FILE.
 * Prints {"p50Ms": …, "p95Ms": …}.
 *
 * <p>With {@code cold}, the cold start instead: a new kernel answers
 * {@code info} (the request in INFO), then {@code plan-context} (PLAN), and
 * the name of each command is printed as soon as it is answered, for the
 * caller to time from the process start.
 *
 * <p>Usage: {@code java dev.ctxkernel.Bench COMMAND FILE ITERATIONS}, or
 * {@code java dev.ctxkernel.Bench cold INFO PLAN}
 */
public final class Bench {
    private Bench() {}

    public static void main(String[] args) throws Exception {
        if (args[0].equals("cold")) {
            Kernel kernel = new Kernel(new MemoryStore());
            for (String[] call : new String[][] {{"info", args[1]}, {"plan-context", args[2]}}) {
                kernel.call(call[0], Files.readString(Path.of(call[1])));
                System.out.println(call[0]);
                System.out.flush();
            }
            return;
        }
        String command = args[0];
        String request = Files.readString(Path.of(args[1]));
        int iterations = Integer.parseInt(args[2]);
        Kernel kernel = new Kernel(new MemoryStore());
        for (int i = 0; i < Math.max(3, iterations / 5); i++) {
            kernel.call(command, request);
        }
        double[] times = new double[iterations];
        for (int i = 0; i < iterations; i++) {
            long start = System.nanoTime();
            kernel.call(command, request);
            times[i] = (System.nanoTime() - start) / 1e6;
        }
        Arrays.sort(times);
        System.out.printf("{\"p50Ms\": %s, \"p95Ms\": %s}%n", at(times, 0.5), at(times, 0.95));
    }

    private static double at(double[] sorted, double q) {
        int rank = (int) Math.ceil(sorted.length * q);
        return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1];
    }
}
