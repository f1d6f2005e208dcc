"""A deterministic scripted LM for tests: a DSPy custom engine whose answer is a function of the prompt,
reporting token usage (one token per whitespace-separated word), safe to call from many threads."""

import threading

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage


class ScriptedEngine:
    def __init__(self, respond):
        self.respond = respond  # (prompt text) -> dict of output field values
        self.calls = 0
        self._lock = threading.Lock()

    def __deepcopy__(self, memo):  # shared by program copies, like a real client
        return self

    def complete(self, request):
        prompt = "\n".join(m.text or "" for m in request.messages)
        if request.system is not None:
            prompt = (request.system if isinstance(request.system, str) else "") + "\n" + prompt
        fields = self.respond(prompt)
        text = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items()) + "[[ ## completed ## ]]"
        with self._lock:
            self.calls += 1
        return Response(id=None, model="scripted", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=len(prompt.split()), output_tokens=len(text.split())))

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self):
        pass


def scripted_lm(respond, **kwargs):
    return dspy.LM("scripted/test", engine=ScriptedEngine(respond), cache=False, **kwargs)
