"""The emulated fabric: Open vSwitch, Mininet, the controller and one agent per host,
brought up as root to run workloads for real.  Only here do processes, namespaces and root
appear; it imports core and the pure packages only."""
