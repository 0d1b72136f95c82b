"""What tests share: fixtures' worlds, rows, fakes' wire, servers for the backends, and the
scripts the system tests run as processes. Nothing here is collected as a test."""
