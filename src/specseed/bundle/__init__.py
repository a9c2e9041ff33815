"""Bug-report bundles: the folder format (writer, reader), comparing two recordings,
replaying a bundle and shrinking a failing scenario."""
