"""One module per subcommand; see copyprobe.cli.main."""
