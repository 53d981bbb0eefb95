from validation.payload.cli import main

raise SystemExit(main())
