// Admin write operations for mirrorgate tests (e.g. checking that the proxy
// rejects writes on read-only topics with clear errors).
//
// Run (single-file source launcher, no build step):
//   java -cp "$(scripts/kafka.sh classpath)" tests/java/AdminOps.java \
//     --bootstrap-server HOST:PORT [--timeout-ms MS] SUBCOMMAND ARGS...
//
// Subcommands:
//   create-topic TOPIC PARTITIONS [REPLICATION_FACTOR]
//   create-partitions TOPIC N              (N = new total partition count)
//   delete-records TOPIC PARTITION OFFSET  (delete records before OFFSET)
//   incremental-alter-config TOPIC key=value [key=value ...]   (SET operations)
//   delete-topic TOPIC [TOPIC ...]          (one DeleteTopics request)
//
// Output: exactly one line on stdout, "OK" (exit 0) or
// "ERROR <ExceptionSimpleClassName>: <message>" (exit 1). Usage errors exit 2.

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

public class AdminOps {
    public static void main(String[] args) {
        quietLogging();
        String bootstrap = null;
        int timeoutMs = 30000;
        List<String> rest = new ArrayList<>();
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--bootstrap-server") && i + 1 < args.length) {
                bootstrap = args[++i];
            } else if (args[i].equals("--timeout-ms") && i + 1 < args.length) {
                timeoutMs = Integer.parseInt(args[++i]);
            } else {
                rest.add(args[i]);
            }
        }
        if (bootstrap == null || rest.isEmpty()) {
            usage("--bootstrap-server and a subcommand are required");
        }
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(Math.min(timeoutMs, 15000)));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "mirrorgate-adminops");
        int rc;
        try (Admin admin = Admin.create(p)) {
            try {
                run(admin, rest, timeoutMs);
                System.out.println("OK");
                rc = 0;
            } catch (IllegalArgumentException e) {
                usage(e.getMessage());
                rc = 2;
            } catch (Exception e) {
                Throwable c = e;
                while ((c instanceof java.util.concurrent.ExecutionException
                        || c instanceof java.util.concurrent.CompletionException) && c.getCause() != null) {
                    c = c.getCause();
                }
                System.out.println("ERROR " + c.getClass().getSimpleName() + ": " + c.getMessage());
                rc = 1;
            }
        }
        System.out.flush();
        System.exit(rc);
    }

    static void run(Admin admin, List<String> a, int timeoutMs) throws Exception {
        String cmd = a.get(0);
        switch (cmd) {
            case "create-topic": {
                need(a, 3);
                short rf = a.size() > 3 ? Short.parseShort(a.get(3)) : 1;
                admin.createTopics(List.of(new NewTopic(a.get(1), Integer.parseInt(a.get(2)), rf)))
                        .all().get(timeoutMs, TimeUnit.MILLISECONDS);
                break;
            }
            case "create-partitions":
                need(a, 3);
                admin.createPartitions(Map.of(a.get(1), NewPartitions.increaseTo(Integer.parseInt(a.get(2)))))
                        .all().get(timeoutMs, TimeUnit.MILLISECONDS);
                break;
            case "delete-records":
                need(a, 4);
                admin.deleteRecords(Map.of(new TopicPartition(a.get(1), Integer.parseInt(a.get(2))),
                                RecordsToDelete.beforeOffset(Long.parseLong(a.get(3)))))
                        .all().get(timeoutMs, TimeUnit.MILLISECONDS);
                break;
            case "incremental-alter-config": {
                need(a, 3);
                Collection<AlterConfigOp> ops = new ArrayList<>();
                for (String kv : a.subList(2, a.size())) {
                    int eq = kv.indexOf('=');
                    if (eq <= 0) {
                        throw new IllegalArgumentException("expected key=value, got '" + kv + "'");
                    }
                    ops.add(new AlterConfigOp(new ConfigEntry(kv.substring(0, eq), kv.substring(eq + 1)),
                            AlterConfigOp.OpType.SET));
                }
                admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, a.get(1)), ops))
                        .all().get(timeoutMs, TimeUnit.MILLISECONDS);
                break;
            }
            case "delete-topic":
                need(a, 2);
                // Several topics: one DeleteTopics request naming all of them.
                admin.deleteTopics(Set.copyOf(a.subList(1, a.size()))).all().get(timeoutMs, TimeUnit.MILLISECONDS);
                break;
            default:
                throw new IllegalArgumentException("unknown subcommand " + cmd);
        }
    }

    static void need(List<String> a, int n) {
        if (a.size() < n) {
            throw new IllegalArgumentException(a.get(0) + " needs " + (n - 1) + " argument(s)");
        }
    }

    static void usage(String msg) {
        System.err.println("usage error: " + msg);
        System.err.println("usage: AdminOps --bootstrap-server HOST:PORT [--timeout-ms MS] "
                + "create-topic T P [RF] | create-partitions T N | delete-records T P OFFSET | "
                + "incremental-alter-config T k=v... | delete-topic T");
        System.exit(2);
    }

    /** Route client logging (log4j2 via slf4j) to stderr at WARN, unless the caller configured it. */
    static void quietLogging() {
        if (System.getProperty("log4j2.configurationFile") != null) {
            return;
        }
        try {
            java.nio.file.Path f = java.nio.file.Files.createTempFile("mirrorgate-log4j2-", ".properties");
            f.toFile().deleteOnExit();
            java.nio.file.Files.writeString(f, String.join("\n",
                    "status = error",
                    "appender.err.type = Console",
                    "appender.err.name = STDERR",
                    "appender.err.target = SYSTEM_ERR",
                    "appender.err.layout.type = PatternLayout",
                    "appender.err.layout.pattern = [%d] %p %m (%c)%n",
                    "rootLogger.level = " + System.getProperty("mirrorgate.log.level", "WARN"),
                    "rootLogger.appenderRef.err.ref = STDERR", ""));
            System.setProperty("log4j2.configurationFile", f.toString());
        } catch (java.io.IOException e) {
            // fall back to log4j2 defaults
        }
    }
}
