"""JIT tuning (docs/reference/jit.md): patches `torch.nn.Module` so that modules are discovered, recorded and
tuned while the user's program runs, with no code changes.

Importing this package changes nothing. Activation is explicit: `import aitune.torch.jit.enable`,
`AUTOWRAPT_BOOTSTRAP=aitune_enable_jit_tuning`, `@patch_for_jit_tuning` or
`with prepare_for_jit_tuning():`; `import aitune.torch.jit.disable` unpatches.
"""
