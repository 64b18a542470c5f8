"""Instructions per chunk: wrapped SDKs, the client transport, chunk events; import time."""
