/*
 * Runs Apache Kafka's own reassignment tool (org.apache.kafka.tools.reassign.ReassignPartitionsCommand,
 * from the kafka-tools jar on the class path) once per request, in one JVM, for the side-by-side
 * comparison with kreassign (tests/side_by_side.py). A JVM start costs 2-3 s on two loaded cores; this
 * server pays it once per Kafka version instead of once per invocation.
 *
 * Each invocation is the tool's real `main`, run in a fresh thread named "main" with System.out and
 * System.err captured. Kafka's Exit procedure (org.apache.kafka.common.utils.Exit, moved to
 * ...utils.internals.Exit in 4.x) is replaced by one that ends the invocation with its status instead of
 * ending the JVM. An exception that escapes `main` (jopt-simple's parse errors) is printed as the JVM
 * prints an uncaught exception of the main thread, and reported with status 1, the java launcher's.
 *
 * Protocol (stdin/stdout, one line each): the server prints "ready"; each request is the argument list,
 * each argument base64-encoded (UTF-8), separated by single spaces (an empty line: no arguments); each
 * reply is {"exit":N,"stdout":"...","stderr":"..."}. The server ends at the end of its input.
 */

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Base64;

public final class ReassignToolServer {
    private static final String TOOL = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
    private static final String[] EXIT_CLASSES = {
        "org.apache.kafka.common.utils.internals.Exit", "org.apache.kafka.common.utils.Exit"};
    private static final long LIMIT_MS = 300_000L;

    /** Thrown by the replaced Exit procedure: the tool asked the JVM to end with `status`. */
    static final class ExitCalled extends RuntimeException {
        final int status;

        ExitCalled(int status) {
            super("exit " + status, null, false, false);
            this.status = status;
        }
    }

    public static void main(String[] args) throws Exception {
        PrintStream replies = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        BufferedReader requests = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        replaceExit();
        Method tool = Class.forName(TOOL).getMethod("main", String[].class);
        replies.println("ready");
        String line;
        while ((line = requests.readLine()) != null) {
            replies.println(run(tool, decode(line)));
        }
    }

    private static void replaceExit() throws Exception {
        boolean found = false;
        for (String name : EXIT_CLASSES) {
            Class<?> exit;
            try {
                exit = Class.forName(name);
            } catch (ClassNotFoundException e) {
                continue;
            }
            Class<?> procedure = Class.forName(name + "$Procedure");
            Object thrower = Proxy.newProxyInstance(procedure.getClassLoader(), new Class<?>[] {procedure},
                (proxy, method, margs) -> {
                    if (!method.getName().equals("execute")) {
                        return method.invoke(proxy, margs);
                    }
                    throw new ExitCalled((Integer) margs[0]);
                });
            exit.getMethod("setExitProcedure", procedure).invoke(null, thrower);
            exit.getMethod("setHaltProcedure", procedure).invoke(null, thrower);
            found = true;
        }
        if (!found) {
            throw new IllegalStateException("no Kafka Exit class on the class path");
        }
    }

    private static String[] decode(String line) {
        if (line.isEmpty()) {
            return new String[0];
        }
        String[] words = line.split(" ", -1);
        String[] argv = new String[words.length];
        for (int i = 0; i < words.length; i++) {
            argv[i] = new String(Base64.getDecoder().decode(words[i]), StandardCharsets.UTF_8);
        }
        return argv;
    }

    private static String run(Method tool, String[] argv) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        PrintStream toolOut = new PrintStream(out, true, "UTF-8");
        PrintStream toolErr = new PrintStream(err, true, "UTF-8");
        int[] status = {0};
        Thread thread = new Thread(() -> {
            try {
                tool.invoke(null, (Object) argv);
            } catch (InvocationTargetException wrapped) {
                Throwable cause = wrapped.getCause();
                if (cause instanceof ExitCalled) {
                    status[0] = ((ExitCalled) cause).status;
                } else {
                    // what ThreadGroup.uncaughtException prints for the main thread
                    toolErr.print("Exception in thread \"main\" ");
                    cause.printStackTrace(toolErr);
                    status[0] = 1;
                }
            } catch (IllegalAccessException e) {
                throw new IllegalStateException(e);
            }
        }, "main");
        System.setOut(toolOut);
        System.setErr(toolErr);
        try {
            thread.start();
            thread.join(LIMIT_MS);
        } finally {
            System.setOut(savedOut);
            System.setErr(savedErr);
        }
        if (thread.isAlive()) {
            return "{\"exit\":-1,\"stdout\":" + quote(out.toString("UTF-8")) + ",\"stderr\":"
                + quote("the tool did not finish within " + LIMIT_MS + " ms") + "}";
        }
        toolOut.flush();
        toolErr.flush();
        return "{\"exit\":" + status[0] + ",\"stdout\":" + quote(out.toString("UTF-8")) + ",\"stderr\":"
            + quote(err.toString("UTF-8")) + "}";
    }

    private static String quote(String text) {
        StringBuilder b = new StringBuilder(text.length() + 16).append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }
}
