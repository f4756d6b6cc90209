package dev.ctxkernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.dylibso.chicory.compiler.internal.ByteClassCollector;
import com.dylibso.chicory.compiler.internal.Compiler;
import com.dylibso.chicory.compiler.internal.CompilerResult;
import com.dylibso.chicory.runtime.Instance;
import com.dylibso.chicory.runtime.Machine;
import com.dylibso.chicory.wasm.Parser;
import com.dylibso.chicory.wasm.WasmModule;
import com.dylibso.chicory.wasm.types.ExternalType;
import com.dylibso.chicory.wasm.types.OpCode;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Constructor;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.objectweb.asm.ClassReader;
import org.objectweb.asm.ClassVisitor;
import org.objectweb.asm.ClassWriter;
import org.objectweb.asm.MethodVisitor;
import org.objectweb.asm.Opcodes;

/**
 * HotSpot never JIT-compiles a method whose bytecode is over 8 000 bytes
 * ({@code HugeMethodLimit}, with {@code DontCompileHugeMethods} on by
 * default), and Chicory compiles each wasm function to one static method
 * {@code func_N}. A function a plan runs that crosses the limit runs
 * interpreted on this host, as the planner and the item decoder once did
 * (docs/BENCHMARKS.md). This test measures the bytecode Chicory emits for
 * every function a plan enters and fails naming those over the limit.
 *
 * <p>Chicory's own dispatch methods ({@code call_indirect_N}, the export
 * switch) are not checked: a plan passes through them a handful of times,
 * and their size follows the module's function count, not the kernel's code.
 */
class HugeMethodTest {
    /** HotSpot's {@code HugeMethodLimit}: a method whose code is longer is never compiled. */
    static final int HUGE_METHOD_LIMIT = 8000;
    private static final Pattern FUNC = Pattern.compile("func_(\\d+)");

    @Test
    void everyFunctionAPlanRunsIsSmallEnoughForHotSpotToCompile() throws IOException {
        WasmModule module;
        try (InputStream in = HugeMethodTest.class.getResourceAsStream("/ctxkernel.wasm")) {
            assertNotNull(in, "ctxkernel.wasm is not on the classpath (run `make jvm`)");
            module = Parser.parse(ComponentBinary.coreModule(ComponentBinary.readAll(in)));
        }
        // The compiler as the jar's build runs it (chicory-compiler-maven-plugin, whose
        // build fails where a function would fall back to the interpreter); the
        // collector only decides where the bytes go. Its result also
        // names the functions left to Chicory's interpreter (their method would pass
        // the JVM's 64 KiB limit): their func_N is only a stub that calls it.
        CompilerResult compiled = Compiler.builder(module).withClassCollectorFactory(ByteClassCollector::new).build().compile();
        Map<Integer, Integer> sizes = functionSizes(compiled.classBytes().values());
        assertEquals(module.importSection().count(ExternalType.FUNCTION) + module.functionSection().functionCount(), sizes.size(),
                "one func_N method per wasm function");
        Function<Instance, Machine> traced = load(compiled.collector().mainClassName(), instrument(compiled.classBytes().values()));
        BitSet planPath = planPath(module, traced);
        assertTrue(planPath.cardinality() > 100, "the plan path was not recorded: " + planPath.cardinality() + " functions");

        List<String> offenders = new ArrayList<>();
        planPath.stream()
                .filter(f -> sizes.get(f) > HUGE_METHOD_LIMIT || compiled.interpretedFunctions().contains(f))
                .boxed()
                .sorted((a, b) -> sizes.get(b) - sizes.get(a))
                .forEach(f -> offenders.add(String.format("  %s  %s  (wasm function %d; called by %s)",
                        compiled.interpretedFunctions().contains(f) ? "over 64 KiB, in Chicory's interpreter" : String.format("%6d bytes", sizes.get(f)),
                        name(module, f), f, callers(module, planPath, f))));
        assertTrue(offenders.isEmpty(), offenders.size() + " of the " + planPath.cardinality()
                + " wasm functions a plan runs compile to JVM methods over HotSpot's " + HUGE_METHOD_LIMIT
                + "-byte JIT limit, so they run interpreted on the JVM host; split them (out-of-line phases,"
                + " #[inline(never)] helpers):\n" + String.join("\n", offenders));
    }

    // ---- The bytecode the host runs ----

    /** Wasm function index → length of the code of its {@code func_N} method, HotSpot's measure. */
    static Map<Integer, Integer> functionSizes(Collection<byte[]> classes) {
        Map<Integer, Integer> sizes = new TreeMap<>();
        classes.forEach(bytes -> codeLengths(bytes).forEach((method, length) -> {
            Matcher m = FUNC.matcher(method);
            if (m.matches()) {
                sizes.put(Integer.parseInt(m.group(1)), length);
            }
        }));
        return sizes;
    }

    /**
     * Each method's {@code code_length} (JVMS 4.7.3), which is what HotSpot
     * compares with the limit. ASM's visitors do not report it, so the
     * method table is walked from {@link ClassReader#header}.
     */
    static Map<String, Integer> codeLengths(byte[] classFile) {
        ClassReader reader = new ClassReader(classFile);
        char[] buffer = new char[reader.getMaxStringLength()];
        Map<String, Integer> lengths = new LinkedHashMap<>();
        int at = reader.header + 6; // access_flags, this_class, super_class
        at += 2 + 2 * reader.readUnsignedShort(at); // interfaces
        for (boolean methods : new boolean[] {false, true}) { // fields, then methods
            int count = reader.readUnsignedShort(at);
            at += 2;
            for (int i = 0; i < count; i++) {
                String name = reader.readUTF8(at + 2, buffer);
                int attributes = reader.readUnsignedShort(at + 6);
                at += 8;
                for (int j = 0; j < attributes; j++) {
                    if (methods && reader.readUTF8(at, buffer).equals("Code")) {
                        lengths.put(name, reader.readInt(at + 10)); // after max_stack, max_locals
                    }
                    at += 6 + reader.readInt(at + 2);
                }
            }
        }
        return lengths;
    }

    // ---- The plan path: the functions a plan enters ----

    /**
     * The wasm functions entered while the kernel answers {@code plan-context}
     * in {@link PlanWorkloads}. Recorded rather than read off the call graph:
     * every command goes through one dispatcher, so statically a plan reaches
     * nearly the whole module.
     */
    static BitSet planPath(WasmModule module, Function<Instance, Machine> traced) throws IOException {
        Trace.ENTERED.clear();
        for (Map.Entry<String, Consumer<PlanWorkloads.Guest>> workload : PlanWorkloads.all().entrySet()) {
            try {
                workload.getValue().accept(new PlanWorkloads.Guest(module, traced));
            } catch (RuntimeException | StackOverflowError trap) {
                // Traps are the parity run's subject, not this test's: C2-compiled code
                // has been seen to trap, late in a long run, on a fixture that passes on a
                // fresh JVM. Once more, on a fresh instance.
                try {
                    workload.getValue().accept(new PlanWorkloads.Guest(module, traced));
                } catch (RuntimeException | StackOverflowError again) {
                    throw new AssertionError("the kernel trapped twice on " + workload.getKey(), again);
                }
            }
        }
        return (BitSet) Trace.ENTERED.clone();
    }

    /** What the instrumented {@code func_N} methods call on entry; public for the generated classes. */
    public static final class Trace {
        static final BitSet ENTERED = new BitSet();
        private static BitSet before;

        private Trace() {}

        public static void entered(int function) {
            if (before != null) {
                ENTERED.set(function);
            }
        }

        static void start() {
            before = (BitSet) ENTERED.clone();
        }

        /** Ends a recording; one that is not {@code kept} is forgotten. */
        static void stop(boolean kept) {
            if (!kept) {
                ENTERED.clear();
                ENTERED.or(before);
            }
            before = null;
        }
    }

    /** The same classes, each {@code func_N} first calling {@link Trace#entered}{@code (N)}. */
    static List<byte[]> instrument(Collection<byte[]> classes) {
        String trace = Trace.class.getName().replace('.', '/');
        List<byte[]> instrumented = new ArrayList<>();
        for (byte[] bytes : classes) {
            ClassReader reader = new ClassReader(bytes);
            ClassWriter writer = new ClassWriter(reader, ClassWriter.COMPUTE_MAXS);
            reader.accept(new ClassVisitor(Opcodes.ASM9, writer) {
                @Override
                public MethodVisitor visitMethod(int access, String name, String descriptor, String signature, String[] exceptions) {
                    MethodVisitor visitor = super.visitMethod(access, name, descriptor, signature, exceptions);
                    Matcher m = FUNC.matcher(name);
                    if (!m.matches()) {
                        return visitor;
                    }
                    int function = Integer.parseInt(m.group(1));
                    return new MethodVisitor(Opcodes.ASM9, visitor) {
                        @Override
                        public void visitCode() {
                            super.visitCode();
                            super.visitLdcInsn(function);
                            super.visitMethodInsn(Opcodes.INVOKESTATIC, trace, "entered", "(I)V", false);
                        }
                    };
                }
            }, 0);
            instrumented.add(writer.toByteArray());
        }
        return instrumented;
    }

    /** A machine factory over {@code classes}, as Chicory's own loader makes one from the classes it compiled. */
    static Function<Instance, Machine> load(String mainClass, Collection<byte[]> classes) {
        Map<String, byte[]> byName = new HashMap<>();
        classes.forEach(bytes -> byName.put(new ClassReader(bytes).getClassName().replace('/', '.'), bytes));
        ClassLoader loader = new ClassLoader(HugeMethodTest.class.getClassLoader()) {
            @Override
            protected Class<?> findClass(String name) throws ClassNotFoundException {
                byte[] bytes = byName.get(name);
                if (bytes == null) {
                    throw new ClassNotFoundException(name);
                }
                return defineClass(name, bytes, 0, bytes.length);
            }
        };
        try {
            Constructor<? extends Machine> machine =
                    loader.loadClass(mainClass.replace('/', '.')).asSubclass(Machine.class).getConstructor(Instance.class);
            return instance -> {
                try {
                    return machine.newInstance(instance);
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException(e);
                }
            };
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    // ---- Naming ----

    /** The function's name from the module's name section, demangled; its index if it has none. */
    static String name(WasmModule module, int function) {
        String name = module.nameSection() == null ? null : module.nameSection().nameOfFunction(function);
        return name == null ? "function " + function : demangle(name);
    }

    /** The plan-path functions that call {@code function} directly: which instance of a generic it is. */
    static String callers(WasmModule module, BitSet planPath, int function) {
        int imported = module.importSection().count(ExternalType.FUNCTION);
        TreeSet<String> callers = new TreeSet<>();
        planPath.stream().filter(f -> f >= imported).forEach(f -> {
            for (var instruction : module.codeSection().getFunctionBody(f - imported).instructions()) {
                if (instruction.opcode() == OpCode.CALL && instruction.operand(0) == function) {
                    callers.add(name(module, f));
                }
            }
        });
        if (callers.isEmpty()) {
            return "an export or call_indirect";
        }
        return String.join(", ", callers.stream().limit(3).toList()) + (callers.size() > 3 ? ", …" : "");
    }

    /** Rust's legacy mangling ({@code _ZN…E}) spelled as rustc-demangle does, hash kept: monomorphs differ only by it. */
    static String demangle(String symbol) {
        String s = symbol.replaceFirst("\\.llvm\\.\\d+$", "");
        if (!s.startsWith("_ZN") || !s.endsWith("E")) {
            return symbol;
        }
        List<String> parts = new ArrayList<>();
        int at = 3;
        while (at < s.length() - 1) {
            int digits = at;
            while (Character.isDigit(s.charAt(at))) {
                at++;
            }
            int end = digits == at ? -1 : at + Integer.parseInt(s.substring(digits, at));
            if (end < 0 || end > s.length() - 1) {
                return symbol;
            }
            parts.add(unescape(s.substring(at, end)));
            at = end;
        }
        return String.join("::", parts);
    }

    private static final Map<String, String> ESCAPES = Map.of(
            "SP", "@", "BP", "*", "RF", "&", "LT", "<", "GT", ">", "LP", "(", "RP", ")", "C", ",");
    private static final Pattern UNICODE = Pattern.compile("u[0-9a-f]{1,6}");

    private static String unescape(String part) {
        String p = part.startsWith("_$") ? part.substring(1) : part;
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < p.length(); ) {
            int close = p.charAt(i) == '$' ? p.indexOf('$', i + 1) : -1;
            if (close > 0) {
                String code = p.substring(i + 1, close);
                String plain = UNICODE.matcher(code).matches()
                        ? new String(Character.toChars(Integer.parseInt(code.substring(1), 16)))
                        : ESCAPES.get(code);
                out.append(plain == null ? p.substring(i, close + 1) : plain);
                i = close + 1;
            } else if (p.startsWith("..", i)) {
                out.append("::");
                i += 2;
            } else {
                out.append(p.charAt(i++));
            }
        }
        return out.toString();
    }
}
