"""Where nodes run: local processes (default); docker and static inventories later."""
