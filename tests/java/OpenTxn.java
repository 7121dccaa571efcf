// Leaves a transaction open: begins it, sends the given values, flushes, prints
// "OPEN <n>" and then waits (the test kills it). Used to check that a mirror never copies
// records of a transaction that is still open on the source.
//
//   java -cp "$(scripts/kafka.sh classpath)" tests/java/OpenTxn.java \
//     --bootstrap-server HOST:PORT --topic T --transactional-id ID --values "o1,o2"

import java.util.Arrays;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class OpenTxn {
    public static void main(String[] args) throws Exception {
        String bootstrap = null, topic = null, txnId = null, values = "";
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--bootstrap-server": bootstrap = args[i + 1]; break;
                case "--topic": topic = args[i + 1]; break;
                case "--transactional-id": txnId = args[i + 1]; break;
                case "--values": values = args[i + 1]; break;
                default: System.err.println("unknown option " + args[i]); System.exit(2);
            }
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "120000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        producer.beginTransaction();
        String[] vs = values.isEmpty() ? new String[0] : values.split(",");
        for (String v : vs) {
            producer.send(new ProducerRecord<>(topic, 0, "open", v)).get();
        }
        producer.flush();
        System.out.println("OPEN " + vs.length);
        System.out.flush();
        Thread.sleep(600_000);
    }
}
