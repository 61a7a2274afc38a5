"""ainic under ``torch.distributed``: the ``ainic`` process-group backend (:mod:`.process_group`), the fabric
service its groups run on (:mod:`.fabric`, which needs no torch), the DDP compression hook with error feedback
(:mod:`.hook`) and the training experiment behind ``ainic train`` (:mod:`.digits`). docs/training.md."""
