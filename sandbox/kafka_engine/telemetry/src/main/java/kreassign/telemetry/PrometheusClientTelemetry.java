package kreassign.telemetry;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.Executors;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.AnyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.AggregationTemporality;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

/**
 * A minimal KIP-714 client-telemetry receiver: a {@code metric.reporters} plugin whose
 * {@link ClientTelemetryReceiver} decodes what clients push (OTLP {@code MetricsData}, which the
 * broker has already decompressed) with the OTLP classes kafka-clients carries shaded, and serves
 * the latest value of every data point on {@code http://127.0.0.1:<kreassign.telemetry.port>/metrics}
 * in Prometheus' text format, under the names and labels the kreassign emulator's /metrics gives
 * them (sandbox/prometheus.py): the metric name with every character outside [a-zA-Z0-9_] made
 * {@code _}; labels {@code client_instance_id} (the UUID in its canonical hex form),
 * {@code client_id} (the request header's) and the data point's attributes. A gauge keeps its last
 * value; a sum is a counter ({@code <name>_total}) that adds up delta pushes and takes a cumulative
 * push as it is. What the broker ignores (resource attributes) is not exported.
 *
 * <p>One endpoint per JVM: Kafka may instantiate a reporter more than once, so the store and the
 * server are shared by every instance and the server closes with the last of them. A test fixture
 * of kreassign's real-Kafka sandbox, not a product: no authentication, no expiry of clients.
 */
public final class PrometheusClientTelemetry implements MetricsReporter, ClientTelemetry, ClientTelemetryReceiver {

    public static final String PORT_CONFIG = "kreassign.telemetry.port";
    private static final String HOST = "127.0.0.1";

    private static final Object LOCK = new Object();
    private static final Map<String, Family> FAMILIES = new TreeMap<>();
    private static HttpServer server;
    private static int users;

    private boolean started;

    /** One exported family: its kind and the latest value per label set (labels in order). */
    private static final class Family {
        final String help;
        final boolean counter;
        final Map<List<String>, Double> samples = new TreeMap<>(PrometheusClientTelemetry::compareLabels);

        Family(String help, boolean counter) {
            this.help = help;
            this.counter = counter;
        }
    }

    @Override
    public void configure(Map<String, ?> configs) {
        Object port = configs.get(PORT_CONFIG);
        if (port == null) {
            throw new IllegalArgumentException(PORT_CONFIG + " is not set: give the port of the /metrics endpoint");
        }
        synchronized (LOCK) {
            if (server == null) {
                try {
                    server = HttpServer.create(new InetSocketAddress(HOST, Integer.parseInt(port.toString().trim())), 16);
                } catch (IOException e) {
                    throw new IllegalStateException("cannot serve client telemetry on " + HOST + ":" + port + ": " + e, e);
                }
                server.createContext("/metrics", PrometheusClientTelemetry::serve);
                server.setExecutor(Executors.newSingleThreadExecutor(r -> {
                    Thread t = new Thread(r, "kreassign-client-telemetry-http");
                    t.setDaemon(true);
                    return t;
                }));
                server.start();
            }
            users++;
            started = true;
        }
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
    }

    @Override
    public void metricChange(KafkaMetric metric) {
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
    }

    @Override
    public void close() {
        synchronized (LOCK) {
            if (started && --users == 0 && server != null) {
                server.stop(0);
                server = null;
            }
            started = false;
        }
    }

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return this;
    }

    @Override
    public void exportMetrics(AuthorizableRequestContext context, ClientTelemetryPayload payload) {
        MetricsData data;
        try {
            ByteBuffer bytes = payload.data().duplicate();
            data = MetricsData.parseFrom(bytes);
        } catch (IOException e) {
            return; // the broker already answered; a payload that is not OTLP exports nothing
        }
        Uuid id = payload.clientInstanceId();
        String instance = new UUID(id.getMostSignificantBits(), id.getLeastSignificantBits()).toString();
        String clientId = context.clientId() == null ? "" : context.clientId();
        synchronized (LOCK) {
            for (ResourceMetrics rm : data.getResourceMetricsList()) {
                for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                    for (Metric metric : sm.getMetricsList()) {
                        keep(instance, clientId, metric);
                    }
                }
            }
        }
    }

    private static void keep(String instance, String clientId, Metric metric) {
        String name = promName(metric.getName());
        switch (metric.getDataCase()) {
            case GAUGE:
                for (NumberDataPoint p : metric.getGauge().getDataPointsList()) {
                    family(name, metric.getName(), false).samples.put(labels(instance, clientId, p), number(p));
                }
                break;
            case SUM:
                boolean delta = metric.getSum().getAggregationTemporality()
                        == AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA;
                String base = name.endsWith("_total") ? name.substring(0, name.length() - "_total".length()) : name;
                Family f = family(base, metric.getName(), true);
                for (NumberDataPoint p : metric.getSum().getDataPointsList()) {
                    List<String> key = labels(instance, clientId, p);
                    double before = delta ? f.samples.getOrDefault(key, 0.0) : 0.0;
                    f.samples.put(key, before + number(p));
                }
                break;
            default:
                break; // histograms and summaries: Kafka's clients push none
        }
    }

    private static Family family(String name, String original, boolean counter) {
        return FAMILIES.computeIfAbsent(name, n -> new Family("KIP-714 " + original, counter));
    }

    /** Label names and values, alternating: client_instance_id, client_id, then the attributes by name. */
    private static List<String> labels(String instance, String clientId, NumberDataPoint p) {
        TreeMap<String, String> attributes = new TreeMap<>();
        for (KeyValue kv : p.getAttributesList()) {
            attributes.put(kv.getKey(), text(kv.getValue()));
        }
        List<String> out = new ArrayList<>(List.of("client_instance_id", instance, "client_id", clientId));
        for (Map.Entry<String, String> e : attributes.entrySet()) {
            out.add(promName(e.getKey()));
            out.add(e.getValue());
        }
        return out;
    }

    /** An attribute's value as text, as the emulator writes it (Python's str of the value). */
    private static String text(AnyValue v) {
        switch (v.getValueCase()) {
            case STRING_VALUE:
                return v.getStringValue();
            case INT_VALUE:
                return Long.toString(v.getIntValue());
            case DOUBLE_VALUE:
                return Double.toString(v.getDoubleValue());
            case BOOL_VALUE:
                return v.getBoolValue() ? "True" : "False";
            default:
                return "";
        }
    }

    private static double number(NumberDataPoint p) {
        return p.getValueCase() == NumberDataPoint.ValueCase.AS_DOUBLE ? p.getAsDouble() : (double) p.getAsInt();
    }

    static String promName(String name) {
        return name.replaceAll("[^a-zA-Z0-9_]", "_");
    }

    private static int compareLabels(List<String> a, List<String> b) {
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
            int c = a.get(i).compareTo(b.get(i));
            if (c != 0) {
                return c;
            }
        }
        return Integer.compare(a.size(), b.size());
    }

    private static void serve(HttpExchange exchange) throws IOException {
        byte[] body;
        synchronized (LOCK) {
            body = exposition().getBytes(StandardCharsets.UTF_8);
        }
        exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
        exchange.sendResponseHeaders(200, body.length);
        try (OutputStream out = exchange.getResponseBody()) {
            out.write(body);
        }
    }

    /** Prometheus text format 0.0.4, as prometheus_client writes it (a counter's family is named with _total). */
    private static String exposition() {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, Family> e : FAMILIES.entrySet()) {
            Family f = e.getValue();
            String sample = f.counter ? e.getKey() + "_total" : e.getKey();
            out.append("# HELP ").append(sample).append(' ').append(f.help).append('\n');
            out.append("# TYPE ").append(sample).append(' ').append(f.counter ? "counter" : "gauge").append('\n');
            for (Map.Entry<List<String>, Double> s : f.samples.entrySet()) {
                out.append(sample).append('{');
                List<String> l = s.getKey();
                for (int i = 0; i < l.size(); i += 2) {
                    out.append(i == 0 ? "" : ",").append(l.get(i)).append("=\"").append(escape(l.get(i + 1))).append('"');
                }
                out.append("} ").append(value(s.getValue())).append('\n');
            }
        }
        return out.toString();
    }

    private static String escape(String v) {
        return v.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }

    private static String value(double v) {
        if (Double.isNaN(v)) {
            return "NaN";
        }
        if (Double.isInfinite(v)) {
            return v > 0 ? "+Inf" : "-Inf";
        }
        return Double.toString(v);
    }
}
