"""What is kept and how it is read: schema, models, documents, store, config, context,
signals."""
