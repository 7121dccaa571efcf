// Produce latency with microsecond resolution, for the proxy benchmark (benches/harness/proxy.sh,
// issue 13 item 4). Kafka's producer-perf prints its percentiles in whole milliseconds, too
// coarse for a proxy whose cost is a fraction of one; this tool uses the same Java producer.
//
// Usage: java -cp <kafka libs> LatencyPerf.java BOOTSTRAP TOPIC RECORDS RECORD_SIZE RATE [WARMUP [DUMP]]
//   Sends RECORDS records of RECORD_SIZE bytes to TOPIC (partition 0) at RATE records/s
//   (acks=all, linger.ms=0, idempotent producer as by default), timing each one from send() to
//   its acknowledgement with System.nanoTime(); the first WARMUP (default RECORDS / 10) are
//   left out of the figures. Prints one line:
//     records=N p50_us=.. p99_us=.. p999_us=.. max_us=.. avg_us=.. rate=..
//   With DUMP, also writes the kept latencies to that file, one per line in send order, in
//   microseconds (integers), so that rounds can be pooled (bench_util.py latency-pooled).
// Exit code 1 when a send fails.
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class LatencyPerf {
    public static void main(String[] args) throws Exception {
        if (args.length < 5) {
            System.err.println("usage: LatencyPerf BOOTSTRAP TOPIC RECORDS RECORD_SIZE RATE [WARMUP]");
            System.exit(2);
        }
        String bootstrap = args[0];
        String topic = args[1];
        int n = Integer.parseInt(args[2]);
        int size = Integer.parseInt(args[3]);
        double rate = Double.parseDouble(args[4]);
        int warmup = args.length > 5 ? Integer.parseInt(args[5]) : n / 10;
        String dump = args.length > 6 ? args[6] : null;

        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "0");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'x');

        long[] latency = new long[n];
        CountDownLatch done = new CountDownLatch(n);
        AtomicReference<Exception> failure = new AtomicReference<>();
        long intervalNs = (long) (1e9 / rate);
        long t0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.partitionsFor(topic); // metadata before the clock starts
            t0 = System.nanoTime();
            for (int i = 0; i < n; i++) {
                long due = t0 + i * intervalNs;
                // Park (never spin: a spinning sender would take a core from the broker and
                // the proxy on a small machine); a late send goes out at once.
                long now;
                while ((now = System.nanoTime()) < due) {
                    LockSupport.parkNanos(due - now);
                }
                final int idx = i;
                final long sent = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                    latency[idx] = System.nanoTime() - sent;
                    if (e != null) failure.compareAndSet(null, e);
                    done.countDown();
                });
            }
            done.await();
        }
        long elapsed = System.nanoTime() - t0;
        if (failure.get() != null) {
            System.err.println("send failed: " + failure.get());
            System.exit(1);
        }
        long[] kept = Arrays.copyOfRange(latency, Math.min(warmup, n - 1), n);
        if (dump != null) {
            StringBuilder sb = new StringBuilder(kept.length * 6);
            for (long l : kept) sb.append(l / 1000).append('\n');
            java.nio.file.Files.writeString(java.nio.file.Path.of(dump), sb);
        }
        Arrays.sort(kept);
        double sum = 0;
        for (long l : kept) sum += l;
        System.out.printf("records=%d p50_us=%.0f p99_us=%.0f p999_us=%.0f max_us=%.0f avg_us=%.0f rate=%.0f%n",
                kept.length, pct(kept, 50), pct(kept, 99), pct(kept, 99.9), kept[kept.length - 1] / 1e3,
                sum / kept.length / 1e3, n / (elapsed / 1e9));
    }

    /** Nearest-rank percentile, in microseconds. */
    static double pct(long[] sorted, double q) {
        int rank = (int) Math.ceil(q / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))] / 1e3;
    }
}
