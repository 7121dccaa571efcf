// Produce latency with microsecond resolution, for the proxy benchmark (benches/harness/proxy.sh,
// issue 13 item 4). Kafka's producer-perf prints its percentiles in whole milliseconds, too
// coarse for a proxy whose cost is a fraction of one; this tool uses the same Java producer.
//
// Usage:
//   java -cp <kafka libs> LatencyPerf.java BOOTSTRAP TOPIC RECORDS RECORD_SIZE RATE [WARMUP [DUMP]]
//     Sends RECORDS records of RECORD_SIZE bytes to TOPIC (partition 0) at RATE records/s
//     (acks=all, linger.ms=0, idempotent producer as by default), timing each one from send()
//     to its acknowledgement with System.nanoTime(); the first WARMUP (default RECORDS / 10)
//     are left out of the figures. Prints one line:
//       records=N p50_us=.. p99_us=.. p999_us=.. max_us=.. avg_us=.. rate=..
//     With DUMP, also writes the kept latencies to that file, one per line in send order, in
//     microseconds (integers).
//   java -cp <kafka libs> LatencyPerf.java --paired BOOTSTRAP_A BOOTSTRAP_B TOPIC RECORDS RECORD_SIZE RATE WARMUP DUMP_A DUMP_B
//     Two producers in one process, one per bootstrap (direct and through the proxy), sending
//     in turn on one clock: a send every 1/RATE s, alternately A and B, so each side sends
//     RECORDS records at RATE/2 records/s and a pair's two sends are 1/RATE s apart; A writes
//     to partition 0 of TOPIC and B to partition 1, so that neither waits on the other's
//     partition (the broker appends to one partition at a time). Both sides
//     meet the same bursts of the machine (the broker's GC, other processes, this JVM's GC),
//     which separate rounds of one side at a time do not: the difference of the two sides'
//     percentiles then measures the proxy, not the moment. Prints the line above per side
//     (prefixed "A " and "B ") and writes each side's kept latencies (µs, send order) to
//     DUMP_A and DUMP_B.
//   java -cp <kafka libs> LatencyPerf.java --sides K BOOTSTRAP_1 .. BOOTSTRAP_K TOPIC RECORDS RECORD_SIZE RATE WARMUP DUMP_1 .. DUMP_K
//     The same with K producers in turn (side s writes to partition s - 1 of TOPIC, which needs K
//     partitions), e.g. direct, a TCP relay, the proxy and direct again (an A/A control) all on
//     one clock. --paired is --sides 2. Prints a line per side, prefixed "A ", "B ", ...
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
        if (args.length > 0 && args[0].equals("--paired")) {
            if (args.length != 10) {
                System.err.println("usage: LatencyPerf --paired BOOTSTRAP_A BOOTSTRAP_B TOPIC RECORDS RECORD_SIZE RATE WARMUP DUMP_A DUMP_B");
                System.exit(2);
            }
            run(new String[] {args[1], args[2]}, args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]),
                    Double.parseDouble(args[6]), Integer.parseInt(args[7]), new String[] {args[8], args[9]});
            return;
        }
        if (args.length > 1 && args[0].equals("--sides")) {
            int k = Integer.parseInt(args[1]);
            if (k < 1 || k > 26 || args.length != 2 + 2 * k + 5) {
                System.err.println("usage: LatencyPerf --sides K BOOTSTRAP_1 .. BOOTSTRAP_K TOPIC RECORDS RECORD_SIZE RATE WARMUP DUMP_1 .. DUMP_K");
                System.exit(2);
            }
            int at = 2 + k;
            run(Arrays.copyOfRange(args, 2, at), args[at], Integer.parseInt(args[at + 1]), Integer.parseInt(args[at + 2]),
                    Double.parseDouble(args[at + 3]), Integer.parseInt(args[at + 4]), Arrays.copyOfRange(args, at + 5, at + 5 + k));
            return;
        }
        if (args.length < 5) {
            System.err.println("usage: LatencyPerf BOOTSTRAP TOPIC RECORDS RECORD_SIZE RATE [WARMUP [DUMP]]");
            System.exit(2);
        }
        int n = Integer.parseInt(args[2]);
        run(new String[] {args[0]}, args[1], n, Integer.parseInt(args[3]), Double.parseDouble(args[4]),
                args.length > 5 ? Integer.parseInt(args[5]) : n / 10, new String[] {args.length > 6 ? args[6] : null});
    }

    /** Sends `n` records per bootstrap, in turn on one clock of `rate` sends/s in all. */
    static void run(String[] bootstraps, String topic, int n, int size, double rate, int warmup, String[] dumps)
            throws Exception {
        int sides = bootstraps.length;
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'x');
        @SuppressWarnings("unchecked")
        KafkaProducer<byte[], byte[]>[] producers = new KafkaProducer[sides];
        long[][] latency = new long[sides][n];
        CountDownLatch done = new CountDownLatch(n * sides);
        AtomicReference<Exception> failure = new AtomicReference<>();
        long intervalNs = (long) (1e9 / rate);
        long t0;
        try {
            for (int s = 0; s < sides; s++) {
                Properties p = new Properties();
                p.put("bootstrap.servers", bootstraps[s]);
                p.put("acks", "all");
                p.put("linger.ms", "0");
                p.put("key.serializer", ByteArraySerializer.class.getName());
                p.put("value.serializer", ByteArraySerializer.class.getName());
                producers[s] = new KafkaProducer<>(p);
                producers[s].partitionsFor(topic); // metadata before the clock starts
            }
            t0 = System.nanoTime();
            for (int i = 0; i < n * sides; i++) {
                long due = t0 + i * intervalNs;
                // Park (never spin: a spinning sender would take a core from the broker and
                // the proxy on a small machine); a late send goes out at once.
                long now;
                while ((now = System.nanoTime()) < due) {
                    LockSupport.parkNanos(due - now);
                }
                final int side = i % sides;
                final int idx = i / sides;
                final long sent = System.nanoTime();
                // One partition a side: neither side's appends wait for another's
                // partition lock (TOPIC needs a partition per side).
                producers[side].send(new ProducerRecord<>(topic, side, null, value), (md, e) -> {
                    latency[side][idx] = System.nanoTime() - sent;
                    if (e != null) failure.compareAndSet(null, e);
                    done.countDown();
                });
            }
            done.await();
        } finally {
            for (KafkaProducer<byte[], byte[]> producer : producers) {
                if (producer != null) producer.close();
            }
        }
        long elapsed = System.nanoTime() - t0;
        if (failure.get() != null) {
            System.err.println("send failed: " + failure.get());
            System.exit(1);
        }
        for (int s = 0; s < sides; s++) {
            long[] kept = Arrays.copyOfRange(latency[s], Math.min(warmup, n - 1), n);
            if (dumps[s] != null) {
                StringBuilder sb = new StringBuilder(kept.length * 6);
                for (long l : kept) sb.append(l / 1000).append('\n');
                java.nio.file.Files.writeString(java.nio.file.Path.of(dumps[s]), sb);
            }
            Arrays.sort(kept);
            double sum = 0;
            for (long l : kept) sum += l;
            System.out.printf("%srecords=%d p50_us=%.0f p99_us=%.0f p999_us=%.0f max_us=%.0f avg_us=%.0f rate=%.0f%n",
                    sides > 1 ? (char) ('A' + s) + " " : "", kept.length, pct(kept, 50), pct(kept, 99),
                    pct(kept, 99.9), kept[kept.length - 1] / 1e3, sum / kept.length / 1e3, n / (elapsed / 1e9));
        }
    }

    /** Nearest-rank percentile, in microseconds. */
    static double pct(long[] sorted, double q) {
        int rank = (int) Math.ceil(q / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))] / 1e3;
    }
}
