import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.connect.runtime.rest.entities.ActiveTopicsInfo;
import org.apache.kafka.connect.runtime.rest.entities.ConfigInfo;
import org.apache.kafka.connect.runtime.rest.entities.ConfigInfos;
import org.apache.kafka.connect.runtime.rest.entities.ConfigKeyInfo;
import org.apache.kafka.connect.runtime.rest.entities.ConfigValueInfo;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorInfo;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorOffset;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorOffsets;
import org.apache.kafka.connect.runtime.rest.entities.ConnectorStateInfo;
import org.apache.kafka.connect.runtime.rest.entities.ErrorMessage;
import org.apache.kafka.connect.runtime.rest.entities.LoggerLevel;
import org.apache.kafka.connect.runtime.rest.entities.Message;
import org.apache.kafka.connect.runtime.rest.entities.PluginInfo;
import org.apache.kafka.connect.runtime.rest.entities.ServerInfo;
import org.apache.kafka.connect.runtime.rest.entities.TaskInfo;
import org.apache.kafka.connect.util.ConnectorTaskId;

/**
 * Decodes REST answers into Kafka Connect's own entity classes, as a Connect client would.
 *
 * <p>Input (a file named by the only argument, else stdin): a JSON array of {"entity": TYPE,
 * "json": TEXT}, TYPE being an entity's simple name or a generic type over them
 * ("List&lt;TaskInfo&gt;", "Map&lt;String,Map&lt;String,ConnectorInfo&gt;&gt;",
 * "ConnectorStateInfo.TaskState"). Output: one JSON line per entry, in order: {"ok": true,
 * "value": ...} with the decoded object read back through the entity's accessors, or {"ok":
 * false, "error": ...}. One JVM decodes the whole batch because a JVM start costs seconds.
 *
 * <p>Decoding is lenient (unknown properties ignored), as a client built on these classes that
 * tolerates a newer server's extra fields would be: what it proves is that every field Connect
 * declares has the type Connect declares.
 */
public final class Decode {
    private static final String ENTITIES = "org.apache.kafka.connect.runtime.rest.entities.";
    private static final Pattern NAME = Pattern.compile("[A-Za-z_][A-Za-z0-9_.]*");
    private static final String TOPICS = "Map<String,ActiveTopicsInfo>";
    private static final Map<String, String> JAVA_NAMES = Map.of(
            "String", "java.lang.String",
            "Object", "java.lang.Object",
            "Integer", "java.lang.Integer",
            "Long", "java.lang.Long",
            "Map", "java.util.Map",
            "List", "java.util.List",
            "Collection", "java.util.Collection");

    private final ObjectMapper mapper = new ObjectMapper()
            .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

    public static void main(String[] args) throws IOException {
        new Decode().run(args.length > 0 ? Files.newInputStream(Path.of(args[0])) : System.in);
    }

    private void run(InputStream input) throws IOException {
        JsonNode batch = mapper.readTree(input);
        StringBuilder out = new StringBuilder();
        for (JsonNode request : batch) {
            out.append(mapper.writeValueAsString(decodeOne(request))).append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }

    private Map<String, Object> decodeOne(JsonNode request) {
        Map<String, Object> result = new LinkedHashMap<>();
        try {
            String entity = request.path("entity").asText();
            String json = request.path("json").asText();
            Object decoded = TOPICS.equals(entity.replace(" ", ""))
                    ? activeTopics(json)
                    : mapper.readValue(json, mapper.getTypeFactory().constructFromCanonical(
                            canonical(entity)));
            result.put("ok", true);
            result.put("value", view(decoded));
        } catch (JsonProcessingException e) {
            // The original message and the path, never the source text: it may hold a config.
            result.put("ok", false);
            result.put("error", e.getOriginalMessage() + " (at " + pathOf(e) + ")");
        } catch (RuntimeException e) {
            result.put("ok", false);
            result.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
        }
        return result;
    }

    private static String pathOf(JsonProcessingException e) {
        String path = e instanceof JsonMappingException mapping ? mapping.getPathReference() : "";
        return path.isEmpty() ? "the JSON text" : path;
    }

    /**
     * KIP-558's answer, {name: {"topics": [...]}}, as ActiveTopicsInfo objects. Jackson cannot
     * build ActiveTopicsInfo itself (its creator's first argument, the connector, has no JSON
     * name), so a client reads the map form and calls the constructor, as done here.
     */
    private Map<String, ActiveTopicsInfo> activeTopics(String json) throws JsonProcessingException {
        Map<String, Map<String, List<String>>> raw = mapper.readValue(
                json, new TypeReference<Map<String, Map<String, List<String>>>>() { });
        Map<String, ActiveTopicsInfo> out = new LinkedHashMap<>();
        raw.forEach((name, entry) -> out.put(name, new ActiveTopicsInfo(name, entry.get("topics"))));
        return out;
    }

    /** "Map<String,ConnectorInfo>" -> Jackson's canonical form with full class names. */
    static String canonical(String entity) {
        Matcher names = NAME.matcher(entity.replace(" ", ""));
        StringBuilder out = new StringBuilder();
        while (names.find()) {
            String name = names.group();
            String full = JAVA_NAMES.getOrDefault(name, ENTITIES + name.replace('.', '$'));
            names.appendReplacement(out, Matcher.quoteReplacement(full));
        }
        names.appendTail(out);
        return out.toString();
    }

    /** The decoded value as plain JSON, every entity read through its own accessors. */
    private static Object view(Object value) {
        if (value == null || value instanceof String || value instanceof Number
                || value instanceof Boolean) {
            return value;
        }
        if (value instanceof Enum<?> constant) {
            return constant.name();
        }
        if (value instanceof Map<?, ?> map) {
            Map<String, Object> out = new LinkedHashMap<>();
            map.forEach((key, item) -> out.put(String.valueOf(key), view(item)));
            return out;
        }
        if (value instanceof Collection<?> items) {
            List<Object> out = new ArrayList<>();
            items.forEach(item -> out.add(view(item)));
            return out;
        }
        return view(fields(value));
    }

    private static Map<String, Object> fields(Object value) {
        Map<String, Object> out = new LinkedHashMap<>();
        if (value instanceof ServerInfo info) {
            out.put("version", info.version());
            out.put("commit", info.commit());
            out.put("clusterId", info.clusterId());
        } else if (value instanceof ConnectorInfo info) {
            out.put("name", info.name());
            out.put("config", info.config());
            out.put("tasks", info.tasks());
            out.put("type", info.type());
        } else if (value instanceof ConnectorTaskId id) {
            out.put("connector", id.connector());
            out.put("task", id.task());
        } else if (value instanceof ConnectorStateInfo info) {
            out.put("name", info.name());
            out.put("connector", info.connector());
            out.put("tasks", info.tasks());
            out.put("type", info.type());
        } else if (value instanceof ConnectorStateInfo.AbstractState state) {
            if (state instanceof ConnectorStateInfo.TaskState task) {
                out.put("id", task.id());
            }
            out.put("state", state.state());
            out.put("workerId", state.workerId());
            out.put("trace", state.trace());
            out.put("version", state.version());
        } else if (value instanceof TaskInfo info) {
            out.put("id", info.id());
            out.put("config", info.config());
        } else if (value instanceof ConfigInfos infos) {
            out.put("name", infos.name());
            out.put("errorCount", infos.errorCount());
            out.put("groups", infos.groups());
            out.put("values", infos.values());
        } else if (value instanceof ConfigInfo info) {
            out.put("definition", info.configKey());
            out.put("value", info.configValue());
        } else {
            moreFields(value, out);
        }
        return out;
    }

    /**
     * PluginInfo.type() dereferences the decoded enum: null (no "type" sent) would throw and
     * hide the other fields, so it reads back as null here and the caller sees it is missing.
     */
    private static String pluginType(PluginInfo info) {
        try {
            return info.type();
        } catch (NullPointerException e) {
            return null;
        }
    }

    private static void moreFields(Object value, Map<String, Object> out) {
        if (value instanceof ConfigKeyInfo key) {
            out.put("name", key.name());
            out.put("type", key.type());
            out.put("required", key.required());
            out.put("defaultValue", key.defaultValue());
            out.put("importance", key.importance());
            out.put("documentation", key.documentation());
            out.put("group", key.group());
            out.put("orderInGroup", key.orderInGroup());
            out.put("displayName", key.displayName());
        } else if (value instanceof ConfigValueInfo info) {
            out.put("name", info.name());
            out.put("value", info.value());
            out.put("recommendedValues", info.recommendedValues());
            out.put("errors", info.errors());
            out.put("visible", info.visible());
        } else if (value instanceof ConnectorOffsets offsets) {
            out.put("offsets", offsets.offsets());
        } else if (value instanceof ConnectorOffset offset) {
            out.put("partition", offset.partition());
            out.put("offset", offset.offset());
        } else if (value instanceof ActiveTopicsInfo info) {
            out.put("connector", info.connector());
            out.put("topics", info.topics());
        } else if (value instanceof PluginInfo info) {
            out.put("className", info.className());
            out.put("type", pluginType(info));
            out.put("version", info.version());
        } else if (value instanceof ErrorMessage error) {
            out.put("errorCode", error.errorCode());
            out.put("message", error.message());
        } else if (value instanceof LoggerLevel level) {
            out.put("level", level.level());
            out.put("lastModified", level.lastModified());
        } else if (value instanceof Message message) {
            out.put("message", message.message());
        } else {
            throw new IllegalArgumentException("no reader for " + value.getClass().getName());
        }
    }
}
