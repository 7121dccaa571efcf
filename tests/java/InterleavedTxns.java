// Two transactions interleaved on partition 0, the first aborted while the second is still
// open, so the ABORT marker sits above the source's last stable offset until the second ends:
//
//   A: begin, send --aborted values          (offsets a..)
//   B: begin, send the first --committed value
//   A: abort                                 (ABORT marker after B's first record)
//   print "ABORTED"; wait until the --gate file exists (at most 300 s)
//   B: send the other --committed values, commit; print "COMMITTED"
//
// Used by tests/real_markers.rs to hold mirrorgate's aborted-records transaction open on the
// destination across a kill -9.
//
//   java -cp "$(scripts/kafka.sh classpath)" tests/java/InterleavedTxns.java \
//     --bootstrap-server HOST:PORT --topic T --transactional-id ID --aborted "a1,a2" \
//     --committed "b1,b2" --gate /path/to/file

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class InterleavedTxns {
    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "600000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = null, topic = null, txnId = null, aborted = "", committed = "", gate = null;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap-server": bootstrap = args[i + 1]; break;
                case "--topic": topic = args[i + 1]; break;
                case "--transactional-id": txnId = args[i + 1]; break;
                case "--aborted": aborted = args[i + 1]; break;
                case "--committed": committed = args[i + 1]; break;
                case "--gate": gate = args[i + 1]; break;
                default: System.err.println("unknown option " + args[i]); System.exit(2);
            }
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        String[] as = aborted.split(","), cs = committed.split(",");
        KafkaProducer<String, String> a = producer(bootstrap, txnId + "-a");
        KafkaProducer<String, String> b = producer(bootstrap, txnId + "-b");
        a.beginTransaction();
        for (String v : as) {
            a.send(new ProducerRecord<>(topic, 0, "a", v)).get();
        }
        b.beginTransaction();
        b.send(new ProducerRecord<>(topic, 0, "b", cs[0])).get();
        a.abortTransaction();
        System.out.println("ABORTED");
        System.out.flush();
        long deadline = System.currentTimeMillis() + 300_000;
        while (!Files.exists(Path.of(gate))) {
            if (System.currentTimeMillis() > deadline) {
                System.err.println("gate " + gate + " never appeared");
                System.exit(3);
            }
            Thread.sleep(100);
        }
        for (int i = 1; i < cs.length; i++) {
            b.send(new ProducerRecord<>(topic, 0, "b", cs[i])).get();
        }
        b.commitTransaction();
        System.out.println("COMMITTED");
        a.close();
        b.close();
    }
}
