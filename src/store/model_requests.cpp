// Rounds (rounds.hpp) in the store: a run's requests to the model, kept until they are answered, and every
// answer line the run took, with what came of it.
#include "kernelevolve/store.hpp"
#include "store/statements.hpp"

namespace kernelevolve {

using store::Stmt;

void Store::add_model_request(RunId run, const ModelRequest& r) {
  std::lock_guard lock(mutex_);
  Stmt s(db_,
         "INSERT INTO model_requests(run_id, request_id, prefix, round, seq, parent, model, prompt, body, state, "
         "outcome) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, run).bind(2, r.id).bind(3, r.prefix).bind(4, r.round).bind(5, r.seq).bind(6, r.parent);
  s.bind(7, r.model).bind(8, r.prompt).bind(9, r.body).bind(10, r.state).bind(11, r.outcome).run();
}

std::vector<ModelRequest> Store::model_requests(RunId run) const {
  std::lock_guard lock(mutex_);
  Stmt s(db_,
         "SELECT request_id, prefix, round, seq, parent, model, prompt, body, state, outcome FROM model_requests "
         "WHERE run_id = ? ORDER BY seq");
  s.bind(1, run);
  std::vector<ModelRequest> out;
  while (s.step()) {
    ModelRequest r;
    r.id = s.text(0);
    r.prefix = s.text(1);
    r.round = s.i64(2);
    r.seq = s.i64(3);
    r.parent = s.i64(4);
    r.model = s.text(5);
    r.prompt = s.text(6);
    r.body = s.text(7);
    r.state = s.text(8);
    r.outcome = s.text(9);
    out.push_back(std::move(r));
  }
  return out;
}

void Store::settle_model_request(RunId run, const std::string& id, const std::string& state,
                                 const std::string& outcome) {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "UPDATE model_requests SET state = ?3, outcome = ?4 WHERE run_id = ?1 AND request_id = ?2");
  s.bind(1, run).bind(2, id).bind(3, state).bind(4, outcome).run();
}

void Store::record_model_answer(RunId run, const ModelAnswerRecord& a) {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "INSERT INTO model_answers(run_id, request_id, source, outcome) VALUES(?, ?, ?, ?)");
  s.bind(1, run).bind(2, a.request_id).bind(3, a.source).bind(4, a.outcome).run();
}

std::vector<ModelAnswerRecord> Store::model_answers(RunId run) const {
  std::lock_guard lock(mutex_);
  Stmt s(db_, "SELECT request_id, source, outcome FROM model_answers WHERE run_id = ? ORDER BY id");
  s.bind(1, run);
  std::vector<ModelAnswerRecord> out;
  while (s.step()) out.push_back({s.text(0), s.text(1), s.text(2)});
  return out;
}

}  // namespace kernelevolve
