package dev.ctxkernel;

import com.dylibso.chicory.runtime.ByteArrayMemory;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Machine;
import dev.ctxkernel.compiled.KernelModule;
import com.dylibso.chicory.wasm.WasmModule;
import com.dylibso.chicory.wasm.types.MemoryLimits;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Function;
import java.util.logging.Logger;
import javax.management.JMException;
import javax.management.ObjectName;

/**
 * Loading the component and crossing into it: the component's core module
 * ({@link ComponentBinary}), compiled to JVM bytecode by Chicory when the
 * jar is built, and one instance of it over a store, with the store port as its
 * imports ({@link Imports}) and its calls lowered by {@link CanonicalAbi}.
 */
final class Engine {
    private static final String INTERFACE = "ctxkernel:kernel/kernel@0.1.0#";

    private record Runtime(byte[] core, String componentSha256, WasmModule module, Function<Instance, Machine> machines) {}

    private static Runtime runtime;

    private final Instance instance;
    private CanonicalAbi abi;

    /** One instance over {@code store}; with {@code maxMemoryBytes}, its linear memory may not grow past it. */
    Engine(Store store, Long maxMemoryBytes) {
        Runtime rt = runtime();
        Instance.Builder builder = Instance.builder(rt.module())
                .withImportValues(Imports.of(store, inst -> abi))
                .withMachineFactory(rt.machines())
                // Plain byte[] with VarHandle access: faster than the default ByteBuffer.
                .withMemoryFactory(ByteArrayMemory::new);
        if (maxMemoryBytes != null) {
            int initial = rt.module().memorySection().orElseThrow().getMemory(0).limits().initialPages();
            builder.withMemoryLimits(new MemoryLimits(initial, (int) (maxMemoryBytes / com.dylibso.chicory.runtime.Memory.PAGE_SIZE)));
        }
        instance = builder.build();
        abi = new CanonicalAbi(instance);
    }

    /**
     * The core module this host runs, compiled to JVM bytecode when the jar
     * was built ({@code KernelModule}, from the Chicory build-time compiler),
     * so no Wasm is compiled at run time. The packaged component is checked
     * against the digest packaged beside it, and its core module against the
     * one those classes were compiled from: a truncated or swapped resource,
     * or classes from another build, fail here rather than as a trap in some
     * later call.
     */
    private static synchronized Runtime runtime() {
        if (runtime == null) {
            byte[] component = resource("ctxkernel.wasm");
            String digest = ComponentBinary.sha256(component);
            String shipped = digestIn(resource("ctxkernel.wasm.sha256"));
            if (!digest.equals(shipped)) {
                throw new IllegalStateException("the packaged ctxkernel.wasm has sha256 " + digest + ", but the jar was built with " + shipped);
            }
            byte[] core = ComponentBinary.coreModule(component);
            String coreDigest = ComponentBinary.sha256(core);
            String compiledFrom = digestIn(resource("dev/ctxkernel/compiled/KernelModule.core.sha256"));
            if (!coreDigest.equals(compiledFrom)) {
                throw new IllegalStateException("the packaged component's core module has sha256 " + coreDigest
                        + ", but the jar's compiled classes were built from " + compiledFrom);
            }
            keepOptimizingCompilerOff();
            runtime = new Runtime(core, digest, KernelModule.load(), KernelModule::create);
        }
        return runtime;
    }

    private static byte[] resource(String name) {
        try (InputStream in = Engine.class.getResourceAsStream("/" + name)) {
            if (in == null) {
                throw new IllegalStateException(name + " is not on the classpath (run `make jvm`)");
            }
            return ComponentBinary.readAll(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The digest in a file as sha256sum writes it (the digest, then the file's name, if any). */
    private static String digestIn(byte[] file) {
        return new String(file, StandardCharsets.US_ASCII).trim().split("\\s+")[0];
    }

    /** Opts back in to HotSpot's optimizing compiler for the module (see {@link #keepOptimizingCompilerOff}). */
    static final String OPTIMIZE_PROPERTY = "ctxkernel.jvm.c2";

    /**
     * Keeps HotSpot's optimizing compiler (C2) away from the module's
     * compiled classes before JDK 25, so every process computes what the
     * other hosts compute. On OpenJDK 17 the module was seen to answer
     * differently under CPU load (a 1 MiB text's token estimate one higher
     * in about one run of three, a trap after heavy warm-up); never with C1
     * alone, never on JDK 25. C1 still compiles those methods (a 10k-item
     * plan takes about 1.55 times as long at p50, 1.3 at p95). The means is a
     * compiler directive for the kernel's compiled classes, added through
     * HotSpot's DiagnosticCommand MBean; a JVM without it is left as it is,
     * with a warning. {@code -Dctxkernel.jvm.c2=true} opts back in.
     */
    private static void keepOptimizingCompilerOff() {
        if (Boolean.getBoolean(OPTIMIZE_PROPERTY) || java.lang.Runtime.version().feature() >= 25) {
            return;
        }
        try {
            CompilerDirectives.excludeFromC2("dev/ctxkernel/compiled/*.*");
        } catch (IOException | RuntimeException | LinkageError e) {
            // LinkageError: a runtime without java.management fails on first
            // use of the nested class, not while this one is verified.
            Logger.getLogger(Engine.class.getName()).warning("cannot keep the optimizing compiler off the kernel's classes: " + e);
        }
    }

    /** HotSpot compiler directives, added at run time (a class of its own: it needs java.management). */
    private static final class CompilerDirectives {
        static void excludeFromC2(String match) throws IOException {
            Path file = Files.createTempFile("ctxkernel-compiler", ".json");
            try {
                Files.writeString(file, "[{match: \"" + match + "\", c2: {Exclude: true}}]");
                Object answer = ManagementFactory.getPlatformMBeanServer().invoke(
                        new ObjectName("com.sun.management:type=DiagnosticCommand"),
                        "compilerDirectivesAdd",
                        // Quoted: the command's arguments are split at spaces.
                        new Object[] {new String[] {"\"" + file + "\""}},
                        new String[] {String[].class.getName()});
                if (!String.valueOf(answer).contains("added")) {
                    throw new IllegalStateException(String.valueOf(answer).trim());
                }
            } catch (JMException e) {
                throw new IllegalStateException(e);
            } finally {
                Files.deleteIfExists(file);
            }
        }
    }

    /** The core module the kernel runs (for checking it against the component). */
    static String componentSha256() {
        return runtime().componentSha256();
    }

    static byte[] coreModule() {
        return runtime().core().clone();
    }

    /** Runs one export with its arguments lowered into guest memory; a trap or a host exception propagates. */
    CanonicalAbi.Result call(String command, byte[]... args) {
        long[] params = new long[2 * args.length];
        for (int i = 0; i < args.length; i++) {
            int[] lowered = abi.lower(args[i]);
            params[2 * i] = lowered[0];
            params[2 * i + 1] = lowered[1];
        }
        int ret = (int) instance.export(INTERFACE + command).apply(params)[0];
        CanonicalAbi.Result result = abi.readResult(ret);
        instance.export("cabi_post_" + INTERFACE + command).apply(ret);
        return result;
    }
}
