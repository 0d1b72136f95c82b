"""Alerts and incidents: run by the scheduler on its store connection.

rules.py            [[alerts]] / [alerting] config: rule kinds, thresholds, receivers
conditions.py       each rule kind as a query: what is firing now, for which subject
credentials.py      the credential kind: a target refused with its key, named by its variable
drill_marks.py      alerts during a fault drill marked "during drill <id>", never held back
lifecycle.py        firing → resolved, deduplicated, silences; the notification outbox
delivery.py         webhook payloads (Slack, generic JSON) and the sender thread
incidents.py        incident windows per target and fault family (engine.core.fault_families)
incident_impact.py  what each incident did to the traffic and cost
watch.py            one evaluation pass, as the scheduler runs it
"""
