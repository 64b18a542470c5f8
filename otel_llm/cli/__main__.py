from otel_llm.cli import main

main()
