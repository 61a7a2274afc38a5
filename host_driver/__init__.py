"""ainic host side: golden models, protocol codec, driver API and CLI."""
