// Command produce sends one record with a Go Kafka client (franz-go or sarama) and prints,
// as one JSON line, how the send ended: the error the client reports, the Kafka error code it
// decoded, whether the client calls it retriable, and the time the send took.
//
// mirrorgate's tests (tests/produce_refusal.rs) use it to check how each client surfaces the
// refusal of a write to a mirror topic.
//
//	produce -client franz|sarama -bootstrap HOST:PORT -topic T -client-id ID [-timeout 60s]
//
// Exit status 0 once the result line is printed (whether the send failed or not), 2 on bad
// arguments or a client that cannot be created.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct {
	Client    string `json:"client"`
	Error     string `json:"error"`
	Code      int16  `json:"code"`
	Retriable bool   `json:"retriable"`
	ElapsedMs int64  `json:"elapsed_ms"`
}

func main() {
	client := flag.String("client", "", "franz or sarama")
	bootstrap := flag.String("bootstrap", "", "bootstrap server host:port")
	topic := flag.String("topic", "", "topic to produce to")
	clientID := flag.String("client-id", "mirrorgate-go", "client.id sent to the broker")
	timeout := flag.Duration("timeout", 60*time.Second, "delivery timeout (retries stop after it)")
	flag.Parse()
	if *bootstrap == "" || *topic == "" {
		fail("-bootstrap and -topic are required")
	}
	var r result
	switch *client {
	case "franz":
		r = franz(*bootstrap, *topic, *clientID, *timeout)
	case "sarama":
		r = saramaProduce(*bootstrap, *topic, *clientID, *timeout)
	default:
		fail("-client must be franz or sarama")
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(2)
}

// franz produces with franz-go's defaults (idempotent, unlimited retries of retriable errors
// within the delivery timeout).
func franz(bootstrap, topic, clientID string, timeout time.Duration) result {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID(clientID),
		kgo.RecordDeliveryTimeout(timeout),
		kgo.ProduceRequestTimeout(10*time.Second),
	)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+10*time.Second)
	defer cancel()
	start := time.Now()
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("refused")}).FirstErr()
	r := result{Client: "franz-go", ElapsedMs: time.Since(start).Milliseconds()}
	if err != nil {
		r.Error = err.Error()
		var ke *kerr.Error
		if errors.As(err, &ke) {
			r.Code = ke.Code
			r.Retriable = ke.Retriable
		}
	}
	return r
}

// saramaProduce produces with a sarama SyncProducer that retries retriable errors up to 10
// times, one second apart.
func saramaProduce(bootstrap, topic, clientID string, timeout time.Duration) result {
	cfg := sarama.NewConfig()
	cfg.ClientID = clientID
	cfg.Version = sarama.V3_9_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = time.Second
	cfg.Producer.Timeout = timeout
	p, err := sarama.NewSyncProducer([]string{bootstrap}, cfg)
	if err != nil {
		fail(err.Error())
	}
	defer p.Close()
	start := time.Now()
	_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: topic, Value: sarama.StringEncoder("refused")})
	r := result{Client: "sarama", ElapsedMs: time.Since(start).Milliseconds()}
	if err != nil {
		r.Error = err.Error()
		var ke sarama.KError
		if errors.As(err, &ke) {
			r.Code = int16(ke)
		}
	}
	return r
}
