// Produces records with explicit (by default very old) timestamps and a chosen key space,
// for mirrorgate tests: old history (producer-id expiry on the destination goes by batch
// timestamp) and compaction (few keys, many updates).
//
// Run (single-file source launcher, no build step):
//   java -cp "$(scripts/kafka.sh classpath)" tests/java/OldProducer.java \
//     --bootstrap-server HOST:PORT --topic T --count N [--partitions P] [--prefix P]
//     [--timestamp-start MS|now] [--keys K] [--key-prefix KP] [--sync] [--prop key=value ...]
//
//   --partitions P       record i goes to partition i % P (default 1)
//   --timestamp-start    record i gets timestamp MS + i (default 978307200000 =
//                        2001-01-01T00:00:00Z); `now` leaves the timestamp to the producer
//   --keys K             key "k-(i % K)"; 0 (default) = "k-i" (every key unique)
//   --key-prefix KP      put KP before every key (default none)
//   --sync               wait for each record before sending the next (one record per
//                        batch; batch.size=0 alone still lets two records share a batch)
//   --prop key=value     producer properties (e.g. batch.size=1024, linger.ms=0,
//                        enable.idempotence=false); acks=all unless given
//
// Values are "PREFIX-i" (default prefix "old"). Output: "delivered N" on stdout (exit 0),
// or "ERROR ..." (exit 1) when any send fails.

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class OldProducer {
    public static void main(String[] args) throws Exception {
        quietLogging();
        String bootstrap = null, topic = null, prefix = "old", keyPrefix = "";
        long count = -1, tsStart = 978307200000L;
        boolean now = false, sync = false;
        int partitions = 1, keys = 0;
        Properties p = new Properties();
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (a) {
                case "--bootstrap-server": bootstrap = v; i++; break;
                case "--topic": topic = v; i++; break;
                case "--count": count = Long.parseLong(v); i++; break;
                case "--partitions": partitions = Integer.parseInt(v); i++; break;
                case "--prefix": prefix = v; i++; break;
                case "--keys": keys = Integer.parseInt(v); i++; break;
                case "--key-prefix": keyPrefix = v; i++; break;
                case "--timestamp-start":
                    if ("now".equals(v)) now = true; else tsStart = Long.parseLong(v);
                    i++;
                    break;
                case "--sync": sync = true; break;
                case "--prop": {
                    int eq = v.indexOf('=');
                    p.put(v.substring(0, eq), v.substring(eq + 1));
                    i++;
                    break;
                }
                default:
                    System.err.println("unknown argument " + a);
                    System.exit(2);
            }
        }
        if (bootstrap == null || topic == null || count < 0) {
            System.err.println("--bootstrap-server, --topic and --count are required");
            System.exit(2);
        }
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "mirrorgate-oldproducer");
        try (KafkaProducer<String, String> producer =
                 new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (long i = 0; i < count; i++) {
                String key = keyPrefix + (keys > 0 ? "k-" + (i % keys) : "k-" + i);
                Long ts = now ? null : tsStart + i;
                Future<RecordMetadata> f =
                    producer.send(new ProducerRecord<>(topic, (int) (i % partitions), ts, key, prefix + "-" + i));
                if (sync) {
                    try {
                        f.get();
                    } catch (Exception e) {
                        System.out.println("ERROR " + e.getCause());
                        System.exit(1);
                    }
                }
                sent.add(f);
            }
            producer.flush();
            long ok = 0;
            for (Future<RecordMetadata> f : sent) {
                try {
                    f.get();
                    ok++;
                } catch (Exception e) {
                    System.out.println("ERROR " + e.getCause());
                    System.exit(1);
                }
            }
            System.out.println("delivered " + ok);
        }
    }

    private static void quietLogging() {
        try {
            Class<?> configurator = Class.forName("org.apache.logging.log4j.core.config.Configurator");
            Class<?> level = Class.forName("org.apache.logging.log4j.Level");
            configurator.getMethod("setRootLevel", level).invoke(null, level.getField("WARN").get(null));
        } catch (Exception ignored) {
            // no log4j2 on the classpath: nothing to quiet
        }
    }
}
