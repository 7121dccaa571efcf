// Transactional producer for mirrorgate tests.
//
// Run (single-file source launcher, no build step):
//   java -cp "$(scripts/kafka.sh classpath)" tests/java/TxnProducer.java \
//     --bootstrap-server HOST:PORT --topic T --transactional-id ID \
//     [--commit "a,b,c"] [--abort "x,y"] [--order commit-first|abort-first] \
//     [--partition P] [--key-prefix K] [--timeout-ms MS] [--prop KEY=VALUE]...
//
// Commits one transaction containing the --commit values and aborts another
// containing the --abort values (an empty list skips that transaction).
// Record keys are "<key-prefix>-<i>" (default prefix "txn").
// Output (stdout), one line per step, e.g.
//   COMMITTED 3 [a, b, c] partitions=[0] offsets=[0, 1, 2]
//   ABORTED 2 [x, y] partitions=[0] offsets=[4, 5]
// Exit 0 on success; on failure prints "ERROR <ExceptionClass>: <message>" and exits 1.

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    static String bootstrap, topic, txnId;
    static String keyPrefix = "txn";
    static Integer partition = null;
    static List<String> commitValues = new ArrayList<>();
    static List<String> abortValues = new ArrayList<>();
    static boolean abortFirst = false;
    static int timeoutMs = 30000;
    static List<String> props = new ArrayList<>();

    public static void main(String[] args) {
        quietLogging();
        try {
            parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("usage error: " + e.getMessage());
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(timeoutMs));
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, String.valueOf(Math.max(timeoutMs, 15000)));
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(Math.min(timeoutMs, 15000)));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "60000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        for (String kv : props) {
            int eq = kv.indexOf('=');
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        int rc = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            try {
                producer.initTransactions();
                System.out.println("INIT transactional.id=" + txnId);
                int keyIndex = 0;
                if (abortFirst) {
                    keyIndex = run(producer, abortValues, false, keyIndex);
                    run(producer, commitValues, true, keyIndex);
                } else {
                    keyIndex = run(producer, commitValues, true, keyIndex);
                    run(producer, abortValues, false, keyIndex);
                }
            } catch (Exception e) {
                Throwable c = unwrap(e);
                // (A send made after the transaction manager entered its error state fails
                // with "Cannot execute transactional method ..."; its cause is the error.)
                String causes = "";
                for (Throwable k = c.getCause(); k != null && k != k.getCause(); k = k.getCause()) {
                    causes += " caused by " + k.getClass().getSimpleName() + ": " + k.getMessage();
                }
                System.out.println("ERROR " + c.getClass().getSimpleName() + ": " + c.getMessage() + causes);
                rc = 1;
            }
        }
        System.out.flush();
        System.exit(rc);
    }

    static int run(KafkaProducer<String, String> producer, List<String> values, boolean commit, int keyIndex)
            throws Exception {
        if (values.isEmpty()) {
            return keyIndex;
        }
        producer.beginTransaction();
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (String v : values) {
            String key = keyPrefix + "-" + keyIndex++;
            futures.add(producer.send(new ProducerRecord<>(topic, partition, key, v)));
        }
        producer.flush();
        TreeSet<Integer> parts = new TreeSet<>();
        List<Long> offsets = new ArrayList<>();
        for (Future<RecordMetadata> f : futures) {
            RecordMetadata md = f.get();
            parts.add(md.partition());
            offsets.add(md.offset());
        }
        if (commit) {
            producer.commitTransaction();
        } else {
            producer.abortTransaction();
        }
        System.out.println((commit ? "COMMITTED " : "ABORTED ") + values.size() + " " + values
                + " partitions=" + parts + " offsets=" + offsets);
        return keyIndex;
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof java.util.concurrent.ExecutionException
                || t instanceof java.util.concurrent.CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static List<String> split(String s) {
        List<String> out = new ArrayList<>();
        if (s == null || s.isEmpty()) {
            return out;
        }
        out.addAll(Arrays.asList(s.split(",", -1)));
        return out;
    }

    static void parse(String[] a) {
        for (int i = 0; i < a.length; i++) {
            String k = a[i];
            if (i + 1 >= a.length) {
                throw new IllegalArgumentException("missing value for " + k);
            }
            String v = a[++i];
            switch (k) {
                case "--bootstrap-server": bootstrap = v; break;
                case "--topic": topic = v; break;
                case "--transactional-id": txnId = v; break;
                case "--commit": commitValues = split(v); break;
                case "--abort": abortValues = split(v); break;
                case "--partition": partition = Integer.parseInt(v); break;
                case "--key-prefix": keyPrefix = v; break;
                case "--timeout-ms": timeoutMs = Integer.parseInt(v); break;
                case "--prop":
                    if (v.indexOf('=') < 1) throw new IllegalArgumentException("--prop needs KEY=VALUE");
                    props.add(v);
                    break;
                case "--order":
                    if (v.equals("abort-first")) abortFirst = true;
                    else if (v.equals("commit-first")) abortFirst = false;
                    else throw new IllegalArgumentException("--order must be commit-first or abort-first");
                    break;
                default: throw new IllegalArgumentException("unknown option " + k);
            }
        }
        if (bootstrap == null || topic == null || txnId == null) {
            throw new IllegalArgumentException("--bootstrap-server, --topic and --transactional-id are required");
        }
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
