import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;

/**
 * Prints Kafka's error-code table from the kafka-clients jar on the classpath, one line per
 * code: "CODE NAME RETRIABLE" (RETRIABLE is "retriable" when the code's exception extends
 * RetriableException, else "final"). Used by tests/error_codes.rs to check mirrorgate's
 * KIP-1279 error codes against the newest Kafka release.
 */
public class ErrorCodes {
    public static void main(String[] args) {
        for (Errors e : Errors.values()) {
            boolean retriable = e.exception() instanceof RetriableException;
            System.out.println(e.code() + " " + e.name() + " " + (retriable ? "retriable" : "final"));
        }
    }
}
