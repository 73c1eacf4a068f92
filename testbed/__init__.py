"""Side effects: OVS and controller lifecycle, Mininet build, backends, runner, CLI."""
