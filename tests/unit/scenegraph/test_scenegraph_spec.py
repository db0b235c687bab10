"""Request -> job parameters: a field the request leaves unset takes the documented default (the proto
declares it `optional`); an explicit 0 or "" out of range is INVALID_ARGUMENT naming the field."""
from __future__ import annotations

import pytest
from paperworks.scenegraph.v1 import scenegraph_pb2
from paperworks.services.scenegraph.spec import PredictParams, TrainParams
from paperworks.shared.errors import violations_from_pydantic
from paperworks.shared.rpc.convert import request_params
from pydantic import ValidationError

SYNTHETIC = scenegraph_pb2.DatasetSource(synthetic=scenegraph_pb2.SyntheticScenes(seed=1))


def _train(**fields) -> TrainParams:
    return TrainParams.model_validate(request_params(scenegraph_pb2.SubmitTrainRequest(dataset=SYNTHETIC,
                                                                                       **fields)))


def test_unset_fields_take_the_documented_defaults():
    p = _train()
    assert (p.base, p.head, p.image_size, p.detector_epochs, p.relation_epochs, p.max_objects) == (
        "motifs", "dsnet", 64, 15, 15, 8)
    assert (p.dsnet.streams, p.dsnet.fusion, p.dsnet.gated) == ("dual", "bidirectional", True)
    assert p.dataset.synthetic.images == 400
    predict = PredictParams.model_validate(request_params(
        scenegraph_pb2.SubmitPredictRequest(train_job_id="scenegraph-x", dataset=SYNTHETIC)))
    assert (predict.top_k, predict.max_drawings) == (20, 20)
    given = _train(image_size=96, base="penet", dsnet=scenegraph_pb2.DSNetOptions(fusion="none", gated=False))
    assert (given.image_size, given.base) == (96, "penet")
    assert (given.dsnet.streams, given.dsnet.fusion, given.dsnet.gated) == ("dual", "none", False)


@pytest.mark.parametrize(("fields", "field"), [
    ({"image_size": 0}, "image_size"),
    ({"detector_epochs": 0}, "detector_epochs"),
    ({"max_objects": 0}, "max_objects"),
    ({"base": ""}, "base"),
    ({"dsnet": scenegraph_pb2.DSNetOptions(streams="")}, "dsnet.streams"),
    ({"dataset": scenegraph_pb2.DatasetSource(synthetic=scenegraph_pb2.SyntheticScenes(images=0))},
     "dataset.synthetic.images"),
])
def test_an_explicit_zero_is_invalid_argument_naming_the_field(fields, field):
    request = scenegraph_pb2.SubmitTrainRequest(**({"dataset": SYNTHETIC} | fields))
    with pytest.raises(ValidationError) as exc:
        TrainParams.model_validate(request_params(request))
    error = violations_from_pydantic(exc.value)
    assert error.code == "INVALID_ARGUMENT" and error.field == field
