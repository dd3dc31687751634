#include "common/internal/header_walk.h"

namespace towerps::internal {
namespace {

// Each getter checks its pointer; a list's size and elements are then in bounds, so a list of
// primitives or text needs only its getter.
void Read(proto::TensorMeta::Reader t) { (void)t.getShape(); }

void Read(proto::TableSegment::Reader s) { (void)s.getName(); }

void Read(proto::VariableSpec::Reader v) {
  (void)v.getName();
  (void)v.getShape();
  (void)v.getPolicy();
  for (proto::TableSegment::Reader s : v.getSegments()) Read(s);
}

void Read(proto::ConfigField::Reader c) {
  (void)c.getName();
  (void)c.getValue();
}

void Read(proto::TableStats::Reader t) { (void)t.getName(); }

void Read(proto::ServerStats::Reader s) {
  for (proto::TableStats::Reader t : s.getTables()) Read(t);
  (void)s.getStalenessHistogram();
  (void)s.getRowStalenessHistogram();
  (void)s.getRegisteredWorkers();
}

void Read(proto::ReplicaState::Reader r) {
  (void)r.getWorkerClocks();
  (void)r.getPendingWorkers();
  (void)r.getPendingRefused();
}

void Read(proto::ShmInfo::Reader s) {
  (void)s.getHost();
  (void)s.getReleased();
}

template <typename Struct>
void ReadEach(typename capnp::List<Struct>::Reader list) {
  for (typename Struct::Reader element : list) Read(element);
}

}  // namespace

void ReadEveryPointer(proto::Header::Reader h) {
  ReadEach<proto::TensorMeta>(h.getTensors());
  (void)h.getStatusMessage();
  (void)h.getPushRefusal();
  ReadEach<proto::VariableSpec>(h.getVariables());
  ReadEach<proto::ConfigField>(h.getConfigFields());
  Read(h.getStats());
  Read(h.getReplicaState());
  (void)h.getPrimaryGroups();
  Read(h.getShm());
  for (capnp::Data::Reader part : h.getParts()) (void)part;  // each element is a pointer
}

}  // namespace towerps::internal
