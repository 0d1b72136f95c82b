"""The demo, `switchover up --demo`: the product on the fake providers with traffic, a repeating
plan of incidents and a fortnight of history, so that the product can be seen at work without
a single key. Nothing here is a mock-up: the real scheduler, gateway and dashboard run, and the
demo's traffic reaches them as an application's would.

    up.py        the run: the fake providers, the plan of incidents, the stack, traffic, console
    traffic.py   requests shaped like three real features, in each caller's dialect
    client.py    that traffic sent to the gateway over HTTP, and what each request got
    console.py   what the console says: each change of state once, the traffic every few seconds
    history.py   the last fourteen days, made by the real chain on a virtual clock
"""
