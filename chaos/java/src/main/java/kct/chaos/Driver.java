package kct.chaos;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One chaos workload client process in a JVM: commands as JSON lines on stdin, one completion per command as a
 * JSON line on stdout (the protocol is specified in chaos/java/__init__.py). Every behaviour is the Java client's
 * own: the driver calls KafkaProducer / KafkaConsumer with the properties it was given and reports what the
 * future, callback or call returned, nothing more. It runs one command at a time (the consumer is not
 * thread-safe, and the workload has one operation in flight per process), and halts when stdin closes, so a
 * parent that dies never leaves it behind.
 */
public final class Driver {
    private final PrintStream out;
    private final Thread mainThread = Thread.currentThread();
    private Properties producerProps = new Properties();
    private Properties consumerProps = new Properties();
    private KafkaProducer<byte[], byte[]> producer;
    private KafkaConsumer<byte[], byte[]> consumer;

    private Driver(PrintStream out) {
        this.out = out;
    }

    public static void main(String[] args) throws InterruptedException {
        // The protocol owns the real stdout; anything else printing to System.out goes to stderr instead.
        PrintStream protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    lines.add(line);
                }
            } catch (Exception e) {
                System.err.println("kct-driver: stdin: " + e);
            }
            lines.add("");  // end of input: the parent closed stdin or died
        }, "kct-stdin");
        reader.setDaemon(true);
        reader.start();
        Driver d = new Driver(protocol);
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("ready", true);
        hello.put("kafka_clients", clientsVersion());
        hello.put("java", System.getProperty("java.version"));
        d.emit(hello);
        while (true) {
            String line = lines.take();
            if (line.isEmpty()) {
                break;
            }
            d.emit(d.handle(line));
        }
        // stdin closed: the clients were closed by a "close" command if the parent wanted that; never linger.
        Runtime.getRuntime().halt(0);
    }

    /** kafka-clients' own version (the resource its AppInfoParser reads; that class is internal API). */
    private static String clientsVersion() {
        Properties p = new Properties();
        try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) {
                p.load(in);
            }
        } catch (java.io.IOException e) {
            return "unknown";
        }
        return p.getProperty("version", "unknown");
    }

    private void emit(Map<String, Object> reply) {
        out.print(Json.write(reply));
        out.print('\n');
        out.flush();
    }

    @SuppressWarnings("unchecked")
    private Map<String, Object> handle(String line) {
        Map<String, Object> reply = new LinkedHashMap<>();
        Object id = null;
        try {
            Map<String, Object> cmd = (Map<String, Object>) Json.parse(line);
            id = cmd.get("id");
            reply.put("id", id);
            String op = String.valueOf(cmd.get("op"));
            switch (op) {
                case "config": config(cmd); break;
                case "check": check(); break;
                case "send": send(cmd, reply); return reply;
                case "assign": consumer().assign(partitions(cmd.get("partitions"))); break;
                case "subscribe": consumer().subscribe((List<String>) cmd.get("topics")); break;
                case "seek":
                    consumer().seek(new TopicPartition((String) cmd.get("topic"), toInt(cmd.get("partition"))),
                                    toLong(cmd.get("offset")));
                    break;
                case "poll": poll(cmd, reply); break;
                case "commit": commit(cmd); break;
                case "end_offsets": endOffsets(cmd, reply); break;
                case "positions": positions(reply); break;
                case "rewind": rewind(); break;
                case "txn_init": producer().initTransactions(); break;
                case "txn_begin": producer().beginTransaction(); break;
                case "txn_send_offsets": producer().sendOffsetsToTransaction(offsets(cmd), consumer().groupMetadata()); break;
                case "txn_commit": producer().commitTransaction(); break;
                case "txn_abort": producer().abortTransaction(); break;
                case "close": close(); break;
                default: throw new IllegalArgumentException("unknown op " + op);
            }
            reply.put("ok", true);
        } catch (Throwable e) {  // every error is an answer; the driver keeps serving
            reply.clear();
            reply.put("id", id);
            error(reply, e);
        }
        return reply;
    }

    /** The Kafka error name (Errors.forException: what the client surfaced) and the cause chain. */
    private static void error(Map<String, Object> reply, Throwable e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        reply.put("ok", false);
        Errors code = Errors.forException(t);  // UNKNOWN_SERVER_ERROR for anything it does not map
        boolean mapped = code != Errors.UNKNOWN_SERVER_ERROR || t instanceof UnknownServerException;
        reply.put("error", mapped ? code.name() : null);
        StringBuilder chain = new StringBuilder();
        for (Throwable c = t; c != null && chain.length() < 2000; c = c.getCause()) {
            if (chain.length() > 0) {
                chain.append(" <- caused by ");
            }
            chain.append(c.getClass().getName()).append(": ").append(c.getMessage());
            if (c.getCause() == c) {
                break;
            }
        }
        reply.put("exception", chain.toString());
    }

    @SuppressWarnings("unchecked")
    private void config(Map<String, Object> cmd) {
        producerProps = props((Map<String, Object>) cmd.get("producer"));
        consumerProps = props((Map<String, Object>) cmd.get("consumer"));
    }

    private static Properties props(Map<String, Object> m) {
        Properties p = new Properties();
        if (m != null) {
            for (Map.Entry<String, Object> e : m.entrySet()) {
                p.setProperty(e.getKey(), String.valueOf(e.getValue()));
            }
        }
        return p;
    }

    /** Construct both clients with the given settings and close them: config, SSL and SASL errors show here. */
    private void check() {
        new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer()).close(Duration.ZERO);
        new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer())
            .close(CloseOptions.timeout(Duration.ZERO));
    }

    private KafkaProducer<byte[], byte[]> producer() {
        if (producer == null) {
            producer = new KafkaProducer<>(producerProps, new ByteArraySerializer(), new ByteArraySerializer());
        }
        return producer;
    }

    private KafkaConsumer<byte[], byte[]> consumer() {
        if (consumer == null) {
            consumer = new KafkaConsumer<>(consumerProps, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }
        return consumer;
    }

    /**
     * KafkaProducer.send and the outcome of its future. "appended": false when the error reached the callback on
     * this thread, inside send(): KafkaProducer.doSend failed before the record entered the accumulator (no
     * metadata within max.block.ms, record too large, ...), so no request can ever carry it. Errors from the
     * network thread leave "appended" out: the Python side decides from the error name.
     */
    private void send(Map<String, Object> cmd, Map<String, Object> reply) {
        byte[] key = cmd.get("key") == null ? null : ((String) cmd.get("key")).getBytes(StandardCharsets.UTF_8);
        byte[] value = cmd.get("value") == null ? null : ((String) cmd.get("value")).getBytes(StandardCharsets.UTF_8);
        ProducerRecord<byte[], byte[]> rec = new ProducerRecord<>((String) cmd.get("topic"),
                                                                  toInt(cmd.get("partition")), key, value);
        AtomicBoolean inCall = new AtomicBoolean(false);
        Future<RecordMetadata> f;
        try {
            f = producer().send(rec, (md, e) -> {
                if (e != null && Thread.currentThread() == mainThread) {
                    inCall.set(true);
                }
            });
        } catch (KafkaException e) {  // thrown by send(): the record never left this call
            error(reply, e);
            reply.put("appended", false);
            return;
        }
        try {
            RecordMetadata md = f.get();  // bounded by the producer's own delivery.timeout.ms
            reply.put("ok", true);
            reply.put("offset", md.offset());
            reply.put("partition", md.partition());
        } catch (ExecutionException | InterruptedException e) {
            error(reply, e);
            if (inCall.get()) {
                reply.put("appended", false);
            }
        }
    }

    /**
     * KafkaConsumer.poll. With "positions": true (manual assignment) also the position of each assigned partition
     * read just before the poll, reported for the partitions whose records start at or after it: KafkaConsumer
     * returns a partition's records from its position on (records below it are dropped), so they are what the
     * log held from there; a record below it means the position was reset inside the poll (out of range,
     * truncation found by validation), and then nothing is claimed for that partition.
     */
    private void poll(Map<String, Object> cmd, Map<String, Object> reply) {
        KafkaConsumer<byte[], byte[]> c = consumer();
        Map<TopicPartition, Long> before = new LinkedHashMap<>();
        if (Boolean.TRUE.equals(cmd.get("positions"))) {
            for (TopicPartition tp : c.assignment()) {
                try {
                    before.put(tp, c.position(tp, Duration.ZERO));
                } catch (KafkaException e) {  // no valid position yet (unknown, awaiting validation): not listed
                }
            }
        }
        ConsumerRecords<byte[], byte[]> got = c.poll(Duration.ofMillis(toLong(cmd.get("timeout_ms"))));
        List<Object> records = new ArrayList<>();
        Map<String, Object> positions = new LinkedHashMap<>();
        for (TopicPartition tp : got.partitions()) {
            List<ConsumerRecord<byte[], byte[]>> rs = got.records(tp);
            Long pos = before.get(tp);
            if (pos != null && !rs.isEmpty() && rs.get(0).offset() >= pos) {
                positions.put(tp.topic() + "/" + tp.partition(), pos);
            }
            for (ConsumerRecord<byte[], byte[]> r : rs) {
                List<Object> row = new ArrayList<>(5);
                row.add(r.topic());
                row.add(r.partition());
                row.add(r.offset());
                row.add(r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
                row.add(r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8));
                records.add(row);
            }
        }
        reply.put("records", records);
        reply.put("positions", positions);
    }

    @SuppressWarnings("unchecked")
    private static Map<TopicPartition, OffsetAndMetadata> offsets(Map<String, Object> cmd) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (Map.Entry<String, Object> e : ((Map<String, Object>) cmd.get("offsets")).entrySet()) {
            offsets.put(tp(e.getKey()), new OffsetAndMetadata(toLong(e.getValue())));
        }
        return offsets;
    }

    /** The consumer's position per assigned partition (past control records: what a read_committed reader reached). */
    private void positions(Map<String, Object> reply) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (TopicPartition tp : consumer().assignment()) {
            m.put(tp.topic() + "/" + tp.partition(), consumer().position(tp));
        }
        reply.put("positions", m);
    }

    /** Back to the group's committed offsets (the beginning where none): after an aborted transaction, an
     *  exactly-once application reads its input again from what was committed. */
    private void rewind() {
        KafkaConsumer<byte[], byte[]> c = consumer();
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
        List<TopicPartition> none = new ArrayList<>();
        for (TopicPartition tp : c.assignment()) {
            OffsetAndMetadata o = committed.get(tp);
            if (o == null) {
                none.add(tp);
            } else {
                c.seek(tp, o.offset());
            }
        }
        if (!none.isEmpty()) {
            c.seekToBeginning(none);
        }
    }

    private void commit(Map<String, Object> cmd) {
        Map<TopicPartition, OffsetAndMetadata> offsets = offsets(cmd);
        if (Boolean.TRUE.equals(cmd.get("async"))) {
            consumer().commitAsync(offsets, (o, e) -> {
                if (e != null) {
                    System.err.println("kct-driver: async commit " + o + " failed: " + e);
                }
            });
        } else {
            consumer().commitSync(offsets);  // bounded by default.api.timeout.ms
        }
    }

    private void endOffsets(Map<String, Object> cmd, Map<String, Object> reply) {
        Map<TopicPartition, Long> ends = consumer().endOffsets(partitions(cmd.get("partitions")),
                                                               Duration.ofMillis(toLong(cmd.get("timeout_ms"))));
        Map<String, Object> m = new LinkedHashMap<>();
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            m.put(e.getKey().topic() + "/" + e.getKey().partition(), e.getValue());
        }
        reply.put("offsets", m);
    }

    private void close() {
        try {
            if (producer != null) {
                producer.close(Duration.ofSeconds(2));
            }
        } finally {
            producer = null;
            try {
                if (consumer != null) {
                    consumer.close(CloseOptions.timeout(Duration.ofSeconds(2)));
                }
            } finally {
                consumer = null;
            }
        }
    }

    @SuppressWarnings("unchecked")
    private static List<TopicPartition> partitions(Object o) {
        List<TopicPartition> tps = new ArrayList<>();
        for (Object k : (List<Object>) o) {
            tps.add(tp((String) k));
        }
        return tps;
    }

    private static TopicPartition tp(String key) {
        int slash = key.lastIndexOf('/');
        return new TopicPartition(key.substring(0, slash), Integer.parseInt(key.substring(slash + 1)));
    }

    private static int toInt(Object o) {
        return Math.toIntExact(toLong(o));
    }

    private static long toLong(Object o) {
        if (o instanceof Number) {
            return ((Number) o).longValue();
        }
        throw new IllegalArgumentException("expected an integer, got " + o);
    }
}
