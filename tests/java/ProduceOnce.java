// Sends one record with the Java producer (Kafka's defaults: idempotent, acks=all, retries of
// retriable errors until delivery.timeout.ms) and reports how the send ended, for
// tests/produce_refusal.rs.
//
// Run (single-file source launcher, no build step):
//   java -cp "$(scripts/kafka.sh classpath)" tests/java/ProduceOnce.java \
//     --bootstrap-server HOST:PORT --topic T --client-id ID [--delivery-timeout-ms MS]
//
// Output, one line each: "exception CLASS" (or "exception none"), "retriable true|false",
// "message TEXT", "elapsed_ms N". Exit 0 once printed.

import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.StringSerializer;

public class ProduceOnce {
    public static void main(String[] args) throws Exception {
        String bootstrap = null, topic = null, clientId = "mirrorgate-java";
        String deliveryTimeout = "60000";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap-server": bootstrap = args[i + 1]; break;
                case "--topic": topic = args[i + 1]; break;
                case "--client-id": clientId = args[i + 1]; break;
                case "--delivery-timeout-ms": deliveryTimeout = args[i + 1]; break;
                default: throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        if (bootstrap == null || topic == null) {
            throw new IllegalArgumentException("--bootstrap-server and --topic are required");
        }
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, deliveryTimeout);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        long start = System.nanoTime();
        Throwable failure = null;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            try {
                producer.send(new ProducerRecord<>(topic, "k", "refused")).get();
            } catch (ExecutionException e) {
                failure = e.getCause();
            }
        }
        long elapsedMs = (System.nanoTime() - start) / 1_000_000;
        System.out.println("exception " + (failure == null ? "none" : failure.getClass().getName()));
        System.out.println("retriable " + (failure instanceof RetriableException));
        System.out.println("message " + (failure == null ? "" : String.valueOf(failure.getMessage())));
        System.out.println("elapsed_ms " + elapsedMs);
    }
}
