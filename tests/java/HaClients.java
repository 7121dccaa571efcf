import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java producer and consumer through several mirrorgate instances while they are killed and
 * restarted (issue 14, tests/scale_out_clients.rs). bootstrap.servers lists every instance;
 * metadata.recovery.strategy=rebootstrap lets the clients go back to the bootstrap list when
 * every broker address they know (the dead instance's ports) stops answering.
 *
 * Produces "v-0", "v-1", ... to partition 0 of TOPIC, one at a time, each waiting for its
 * acknowledgement (acks=all, idempotent, retries for up to 120 s), for SECONDS, while a
 * consumer (partition 0 assigned from the beginning, no group) reads. Then waits up to 60 s for
 * the rest.
 *
 * Usage: HaClients BOOTSTRAP TOPIC SECONDS
 * Prints "produced N consumed M max_ack_gap_ms G max_read_gap_ms R"; exits 1 unless the
 * consumed values are exactly the produced ones at offsets 0..N-1.
 */
public class HaClients {
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        long seconds = Long.parseLong(a[2]);
        Properties common = new Properties();
        common.put("bootstrap.servers", bootstrap);
        common.put("metadata.recovery.strategy", "rebootstrap");
        common.put("reconnect.backoff.max.ms", "1000");
        common.put("socket.connection.setup.timeout.ms", "3000");
        common.put("socket.connection.setup.timeout.max.ms", "5000");
        common.put("request.timeout.ms", "10000");
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put("acks", "all");
        pp.put("enable.idempotence", "true");
        pp.put("linger.ms", "0");
        pp.put("delivery.timeout.ms", "120000");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        Properties cp = new Properties();
        cp.putAll(common);
        cp.put("enable.auto.commit", "false");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());

        List<String> consumed = new ArrayList<>();
        List<Long> offsets = new ArrayList<>();
        AtomicLong produced = new AtomicLong();
        AtomicLong maxReadGap = new AtomicLong();
        Thread reader = new Thread(() -> {
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                TopicPartition tp = new TopicPartition(topic, 0);
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                long deadline = Long.MAX_VALUE;
                long lastRead = System.currentTimeMillis();
                while (System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                        long now = System.currentTimeMillis();
                        maxReadGap.set(Math.max(maxReadGap.get(), now - lastRead));
                        lastRead = now;
                        synchronized (consumed) {
                            consumed.add(r.value());
                            offsets.add(r.offset());
                        }
                    }
                    if (deadline == Long.MAX_VALUE && produced.get() < 0) {
                        deadline = System.currentTimeMillis() + 60_000;
                    }
                    synchronized (consumed) {
                        if (produced.get() < 0 && consumed.size() >= -produced.get()) {
                            return;
                        }
                    }
                }
            }
        });
        reader.start();
        long n = 0;
        long maxAckGap = 0;
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            long end = System.currentTimeMillis() + seconds * 1000;
            long lastAck = System.currentTimeMillis();
            while (System.currentTimeMillis() < end) {
                p.send(new ProducerRecord<>(topic, 0, null, "v-" + n)).get();
                long now = System.currentTimeMillis();
                maxAckGap = Math.max(maxAckGap, now - lastAck);
                lastAck = now;
                n++;
                Thread.sleep(20);
            }
        }
        produced.set(-n);
        reader.join(90_000);
        boolean ok;
        synchronized (consumed) {
            ok = consumed.size() == n;
            for (int i = 0; ok && i < n; i++) {
                ok = consumed.get(i).equals("v-" + i) && offsets.get(i) == i;
            }
            System.out.println("produced " + n + " consumed " + consumed.size() + " max_ack_gap_ms " + maxAckGap
                    + " max_read_gap_ms " + maxReadGap.get());
        }
        System.exit(ok ? 0 : 1);
    }
}
