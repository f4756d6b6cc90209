package dev.ctxkernel;

import com.dylibso.chicory.compiler.MachineFactoryCompiler;
import com.dylibso.chicory.runtime.ByteArrayMemory;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Machine;
import com.dylibso.chicory.wasm.Parser;
import com.dylibso.chicory.wasm.WasmModule;
import com.dylibso.chicory.wasm.types.MemoryLimits;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.function.Function;

/**
 * Loading the component and crossing into it: the component's core module
 * ({@link ComponentBinary}), compiled to JVM bytecode by Chicory once per
 * process, and one instance of it over a store, with the store port as its
 * imports ({@link Imports}) and its calls lowered by {@link CanonicalAbi}.
 */
final class Engine {
    private static final String INTERFACE = "ctxkernel:kernel/kernel@0.1.0#";

    private record Runtime(byte[] core, WasmModule module, Function<Instance, Machine> machines) {}

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

    /** The core module this host runs, taken from the packaged component; parsed and compiled once. */
    private static synchronized Runtime runtime() {
        if (runtime == null) {
            try (InputStream in = Engine.class.getResourceAsStream("/ctxkernel.wasm")) {
                if (in == null) {
                    throw new IllegalStateException("ctxkernel.wasm is not on the classpath (run `make jvm`)");
                }
                byte[] core = ComponentBinary.coreModule(ComponentBinary.readAll(in));
                WasmModule module = Parser.parse(core);
                runtime = new Runtime(core, module, MachineFactoryCompiler.compile(module));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return runtime;
    }

    /** The core module the kernel runs (for checking it against the component). */
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
