package dev.ctxkernel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** One session imported in OpenAI Chat form, rendered as Anthropic Messages and validated. */
class TranscriptsTest {
    static final String IMPORT = """
            {"schemaVersion": 1, "sessionId": "t1", "format": "openai-chat", "now": "2026-06-01T09:00:00Z", "expectedHead": {"seq": 0},
             "allowedSinks": ["model:*"], "sensitivity": "internal",
             "transcript": {"messages": [
               {"role": "system", "content": "Be terse."},
               {"role": "user", "content": "Is main green? ☕"},
               {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                 "function": {"name": "ci_status", "arguments": "{\\"branch\\": \\"main\\", \\"n\\": 9007199254740991}"}}]},
               {"role": "tool", "tool_call_id": "call_1", "content": "green"}],
               "tools": [{"type": "function", "function": {"name": "ci_status", "parameters": {"type": "object"}}}]}}
            """;
    static final Map<String, Object> PLAN = Map.of("schemaVersion", 1, "sessionId", "t1", "now", "2026-06-01T09:05:00Z", "sink", "model:test",
            "model", Map.of("profile", "m-32k", "window", 32768, "reservedOutput", 4096, "safetyMargin", 1024));

    @Test
    void aTranscriptImportsOnceRendersInAnotherFormatAndValidates() throws Exception {
        Kernel kernel = new Kernel(new MemoryStore());
        ObjectMapper strict = new ObjectMapper().enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES);
        var first = strict.readValue(kernel.call("import-messages", IMPORT), Envelopes.ImportResponse.class);
        assertEquals(5, first.appended().size(), "the tool definition, the system message and three turns");
        var again = kernel.importMessages(Fixtures.as(IMPORT, Envelopes.ImportRequest.class));
        assertEquals(List.of(0L, 5L), List.of((long) again.appended().size(), again.skipped()));
        assertEquals(first.head(), again.head());
        Map<String, Object> render = Map.of("schemaVersion", 1, "format", "anthropic-messages", "plan", PLAN);
        String text = kernel.call("render-context", Kernel.JSON.writeValueAsString(render));
        var rendered = strict.readValue(text, Envelopes.RenderResponse.class);
        assertEquals(kernel.planContext(Fixtures.as(PLAN, Envelopes.PlanRequest.class)).digest(), rendered.planDigest());
        JsonNode body = rendered.body();
        assertEquals("Be terse.", body.get("system").asText());
        assertEquals("tool_use", body.at("/messages/1/content/0/type").asText());
        // The largest whole number on the wire is in the kernel's text, digit for digit.
        assertTrue(text.contains("\"n\":9007199254740991"), text);
        var verdict = kernel.validateRequest(Fixtures.as(Map.of("schemaVersion", 1, "format", "anthropic-messages", "body", body), Envelopes.ValidateRequest.class));
        assertTrue(verdict.valid(), verdict.violations().toString());
        // renderContext hands the body's own text over, digits and escapes as the kernel wrote them.
        for (String format : List.of("anthropic-messages", "openai-chat", "openai-responses")) {
            Map<String, Object> request = Map.of("schemaVersion", 1, "format", format, "plan", PLAN);
            String whole = kernel.call("render-context", Kernel.JSON.writeValueAsString(request));
            var typed = kernel.renderContext(Fixtures.as(request, Envelopes.RenderRequest.class));
            assertTrue(whole.contains(",\"body\":" + typed.bodyJson() + ",\"budget\":"), format);
            assertEquals(typed.body(), Kernel.JSON.readTree(typed.bodyJson()), format);
        }
    }

    @Test
    void aMemberIsCutFromTheTextWhateverItsStringsHold() throws Exception {
        String a = Kernel.JSON.writeValueAsString("}\"{\\");
        String body = Kernel.JSON.writeValueAsString(Map.of("x", List.of(1, Map.of("y", "]}\\\"},"), Map.of("z", true))));
        String text = "{\"a\":" + a + ",\"body\":" + body + ",\"c\":-1.5e3}";
        assertEquals("]}\\\"},", Kernel.JSON.readTree(text).at("/body/x/1/y").asText(), "the fixture is JSON");
        assertEquals(body, Kernel.member(text, "body"));
        assertEquals("-1.5e3", Kernel.member(text, "c"));
        assertEquals(a, Kernel.member(text, "a"));
        assertThrows(java.io.IOException.class, () -> Kernel.member(text, "nope"));
    }

    @Test
    void aBrokenBodyIsViolationsAndABrokenTranscriptAppendsNothing() {
        Kernel kernel = new Kernel(new MemoryStore());
        var body = Map.of("model", "m", "max_tokens", 10, "messages",
                List.of(Map.of("role", "assistant", "content", List.of(Map.of("type", "tool_use", "id", "x", "name", "f", "input", Map.of())))));
        var verdict = kernel.validateRequest(Fixtures.as(Map.of("schemaVersion", 1, "format", "anthropic-messages", "body", body), Envelopes.ValidateRequest.class));
        assertFalse(verdict.valid());
        assertTrue(verdict.violations().stream().anyMatch(v -> v.rule().equals("call-without-result")), verdict.violations().toString());
        String orphan = IMPORT.replace("\"tool_call_id\": \"call_1\"", "\"tool_call_id\": \"call_nobody\"");
        var error = assertThrows(KernelException.class, () -> kernel.call("import-messages", orphan));
        assertEquals(ErrorCode.INVALID_REQUEST, error.code());
        assertTrue(error.getMessage().contains("call_nobody"), error.getMessage());
        var missing = assertThrows(KernelException.class, () -> kernel.readEvents(Fixtures.as(Map.of("schemaVersion", 1, "sessionId", "t1"), Envelopes.ReadEventsRequest.class)));
        assertEquals(ErrorCode.NOT_FOUND, missing.code());
    }
}
