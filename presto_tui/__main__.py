from presto_tui.cli import main

main()
