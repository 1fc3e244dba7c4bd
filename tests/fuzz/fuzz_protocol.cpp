// Protocol messages (common/ipc/protocol.h): any bytes, every body accessor on every message.
// Contract: a bad message is a ProtocolError whose field is named (in what() too); a body that
// decodes re-encodes to bytes that decode to the same encoding (a fixpoint).
#include <optional>

#include "fuzz_contract.h"
#include "protocol.h"

using namespace rootspec;

namespace {

void check_error(const ProtocolError& e) {
  FUZZ_CHECK(!e.field.empty(), e.what());
  FUZZ_CHECK_NAMED(e.what(), e.field);
}

// Decodes the body with `get`; on success, encode → decode → encode must give the same bytes.
template <typename Body>
void accessor(const Message& m, Body (Message::*get)() const) {
  Body body;
  try {
    body = (m.*get)();
  } catch (const ProtocolError& e) {
    return check_error(e);
  }
  const std::string bytes = encode(m.header(), body);
  const Message again(bytes.data(), bytes.size());  // must not throw: we wrote it
  FUZZ_CHECK(encode(again.header(), (again.*get)()) == bytes, "round trip changed the message");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<Message> m;
  try {
    m.emplace(data, size);
  } catch (const ProtocolError& e) {
    check_error(e);
    return 0;
  }
  accessor(*m, &Message::hello);
  accessor(*m, &Message::ready);
  accessor(*m, &Message::prefill);
  accessor(*m, &Message::commit);
  accessor(*m, &Message::pool);
  accessor(*m, &Message::error);
  accessor(*m, &Message::generate);
  accessor(*m, &Message::delta);
  accessor(*m, &Message::done);
  accessor(*m, &Message::accepted);
  accessor(*m, &Message::status);
  try {
    m->empty_body();
  } catch (const ProtocolError& e) {
    check_error(e);
  }
  try {
    if (m->is_nccl_announcement()) (void)m->nccl_bytes();
  } catch (const ProtocolError& e) {
    check_error(e);
  }
  return 0;
}
