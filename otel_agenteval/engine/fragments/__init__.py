"""Pieces of one run that arrive each as a trace of its own (an instrumentation that does not
propagate context), put back together by time: :mod:`.stitch` decides, a pure function over the
pieces' windows; :mod:`.held` holds the pieces until a door or quiescence says their group is
complete, bounded, and plays each group back into the engine.

Part of ``engine`` (stage 5): imports ``reading`` and ``model``; imported by ``engine.engine``.
"""
