"""Alerts and incidents: run by the scheduler on its store connection.

rules.py       [[alerts]] / [alerting] config: rule kinds, thresholds, receivers
conditions.py  each rule kind as a query: what is firing now, for which subject
lifecycle.py   firing → resolved, deduplicated, silences; the notification outbox
delivery.py    webhook payloads (Slack, generic JSON) and the sender thread
incidents.py   incident windows per provider and route, with their cost
watch.py       one evaluation pass, as the scheduler runs it
"""
