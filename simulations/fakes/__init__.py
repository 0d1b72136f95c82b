"""Fault-injecting fake Anthropic and OpenAI providers, for tests, demos and the simulator.

`FakeProviders` is a real HTTP/1.1 server on loopback; `FakeTransport` serves the same answers
and faults in process as an httpx transport. The faults, and how to ask for them, are in
`simulations.fakes.faults`; the control endpoints and fault selection in `simulations.fakes.app`;
each provider's prompt caches, which expire on the fake's clock, in `simulations.fakes.cache`.

A request whose last message is the assistant's is continued, in both dialects: the answer
is the rest of the fake's reply after that text (see `simulations.fakes.model`), so a stream
cut on one fake and continued on another reads as one answer. The `prefill_rejected` fault
plays a model that refuses such requests.
"""

from simulations.fakes.app import Call, FakeApp
from simulations.fakes.faults import CATALOGUE, FAULT_NAMES, FAULTS, Fault, FaultSpec, parse_spec
from simulations.fakes.server import FakeProviders, serve_forever
from simulations.fakes.transport import FakeTransport

__all__ = [
    "CATALOGUE",
    "FAULTS",
    "FAULT_NAMES",
    "Call",
    "FakeApp",
    "FakeProviders",
    "FakeTransport",
    "Fault",
    "FaultSpec",
    "parse_spec",
    "serve_forever",
]
