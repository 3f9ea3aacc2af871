"""Pictures and descriptions of tilings in the user's coordinates: the layer above the
runtime that reads a table's recorded call (``table.call``, set by ``explain``) and the
runtime's geometry functions. Tables never import it: ``describe`` asks the call."""
