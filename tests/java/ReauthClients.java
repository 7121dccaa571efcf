import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java producer and consumer side by side for a while (KIP-368 re-authentication test,
 * tests/security_reauth.rs): produces "v-0", "v-1", ... to partition 0 every 100 ms for
 * SECONDS while a consumer (partition 0 assigned from the beginning, no group) reads, then
 * waits up to 30 s for the rest. SASL_PLAINTEXT with SCRAM-SHA-512 as USER.
 *
 * Usage: ReauthClients BOOTSTRAP TOPIC SECONDS USER PASSWORD
 * Prints "produced N consumed M"; exits 1 unless the consumed values are exactly the
 * produced ones at offsets 0..N-1.
 */
public class ReauthClients {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1], user = a[3], password = a[4];
        long seconds = Long.parseLong(a[2]);
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        common.put("security.protocol", "SASL_PLAINTEXT");
        common.put("sasl.mechanism", "SCRAM-SHA-512");
        common.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                + user + "\" password=\"" + password + "\";");
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("acks", "all");
        pp.put("linger.ms", "0");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        Properties cp = new Properties();
        cp.putAll(common);
        cp.put("enable.auto.commit", "false");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        TopicPartition tp = new TopicPartition(topic, 0);
        List<String> got = new ArrayList<>();
        List<Long> offsets = new ArrayList<>();
        int n = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(pp);
                KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cp)) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = System.currentTimeMillis() + seconds * 1000;
            while (System.currentTimeMillis() < end) {
                producer.send(new ProducerRecord<>(topic, 0, null, "v-" + n)).get();
                n++;
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    got.add(r.value());
                    offsets.add(r.offset());
                }
            }
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                    offsets.add(r.offset());
                }
            }
        }
        System.out.println("produced " + n + " consumed " + got.size());
        for (int i = 0; i < n; i++) {
            if (i >= got.size() || !got.get(i).equals("v-" + i) || offsets.get(i) != i) {
                System.err.println("ERROR record " + i + ": " + (i < got.size() ? got.get(i) + "@" + offsets.get(i) : "missing"));
                System.exit(1);
            }
        }
        if (got.size() != n) {
            System.err.println("ERROR " + (got.size() - n) + " extra records");
            System.exit(1);
        }
    }
}
