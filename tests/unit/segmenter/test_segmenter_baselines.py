"""The claim-2 and claim-3 baselines: the paper-style manual minor parameters and the 3D U-Net's
binary, full-batch training (issue 26: both methods learn the same task from the same volumes)."""

from __future__ import annotations

import numpy as np
from paperworks.services.segmenter import baselines, data
from paperworks.services.segmenter.semir import search
from paperworks.services.segmenter.semir.minor import build_minor

CFG = data.PhantomConfig(size=24, lesions=2, lesion_radius=2.0)


def test_manual_parameters_delete_the_air_and_keep_every_lesion_voxel():
    vols = data.cohort(CFG, range(2))
    manual = search.manual([v[0] for v in vols])
    hand = search.hand_set([v[0] for v in vols])
    assert manual.psi < hand.psi  # finer bands than the old hand-set vector's 0.1 R
    for image, labels in vols:
        m = build_minor(image, manual)
        assert (m.node[labels == 2] >= 0).all()  # no lesion voxel is deleted
        assert (m.node[labels == 0] == -1).mean() > 0.3  # the air around the body and the body are
        assert (m.node[labels == 1] >= 0).mean() > 0.95  # nor the organs (a few border voxels)


def test_unet_trains_binary_on_every_volume_per_step_and_reports_validation():
    vols = data.cohort(data.PhantomConfig(size=16, lesions=1, lesion_radius=2.0), range(3))
    seen = []
    net = baselines.train_unet(
        vols,
        2,
        steps=4,
        base=2,
        structure=2,
        batch=None,
        eval_every=2,
        on_eval=lambda step, model: seen.append((step, model.training)),
    )
    assert seen == [(2, False), (4, False)]
    assert net.head.out_channels == 2 and not net.training
    pred = baselines.predict_unet(net, vols[0][0])
    assert pred.shape == vols[0][0].shape and set(np.unique(pred)) <= {0, 1}
