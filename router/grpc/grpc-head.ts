import protobuf from 'protobufjs';
import { splitModelId } from '../../common/model-version.js';

/**
 * ModelInferRequest, ModelMetadataRequest and ModelReadyRequest share field 1 (model_name / name)
 * and field 2 (model_version / version): the two the router rewrites when a ModelRoute sends a
 * call to its backend. (common/grpc/message-scan.ts reads them, with the rest of the message.)
 */
const HEAD = new protobuf.Type('ModelHead').add(new protobuf.Field('name', 1, 'string')).add(new protobuf.Field('version', 2, 'string'));

/**
 * `raw` sent to `model` (`id` or `id@v`) in place of the model it names: `model_name` and
 * `model_version` (empty for an unversioned model, so no version of the message's is left) are
 * appended, re-encoded. A protobuf parser keeps the last value of a non-repeated scalar field,
 * so the replica reads the new name and version and every other field as the bytes received.
 */
export function addressedTo(raw: Buffer, model: string): Buffer {
  const { base, version } = splitModelId(model);
  // protobufjs writes a field that is set even when it holds the default (an empty version).
  const tail = HEAD.encode({ name: base, version: version ?? '' }).finish();
  return Buffer.concat([raw, tail], raw.length + tail.length);
}
