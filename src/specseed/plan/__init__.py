"""Planning: model.yaml and scenarios resolved into run plans, with the engine settings
resolved once; what an audit will check."""
