// Loading libtowerps_cuda.so on first use (kernels/gpu_plugin.h), and ListGpus() through it.
#include "kernels/gpu_plugin.h"

#include <dlfcn.h>

#include <atomic>
#include <filesystem>
#include <system_error>

namespace towerps::kernels {
namespace {

struct Plugin {
  const GpuPluginApi* api = nullptr;
  std::string error;  // why api is null
};

std::atomic<bool> loaded{false};

// The places kernels/gpu_plugin.h names, in order.
std::vector<std::string> Candidates() {
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path().parent_path() / "lib" / kGpuPluginFile).string());
    out.push_back((exe.parent_path() / kGpuPluginFile).string());
  }
  out.push_back(std::string(TOWERPS_INSTALL_LIBDIR) + "/" + kGpuPluginFile);
  return out;
}

Plugin Open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return {nullptr, "cannot load " + path + ": " + (why ? why : "unknown dlopen error")};
  }
  using Entry = const GpuPluginApi* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(handle, kGpuPluginEntry));
  const GpuPluginApi* api = entry ? entry() : nullptr;
  if (api == nullptr || api->abi != kGpuPluginAbi ||
      api->options_size != sizeof(CudaBackendOptions)) {
    dlclose(handle);  // not ours, or another build's: nothing of it stays loaded
    if (entry == nullptr) {
      return {nullptr, path + " is not a TowerPS GPU plugin (no " + std::string(kGpuPluginEntry) +
                           "); rebuild TowerPS"};
    }
    return {nullptr, path + " comes from another TowerPS build (plugin ABI " +
                         std::to_string(api ? api->abi : -1) + ", this program's " +
                         std::to_string(kGpuPluginAbi) + "); rebuild or reinstall TowerPS"};
  }
  api->init_logging(CurrentLogOptions());
  loaded.store(true);
  return {api, ""};
}

Plugin Load() {
  std::string tried;
  for (const std::string& path : Candidates()) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec)) return Open(path);
    tried += (tried.empty() ? "" : ", ") + path;
  }
  // Last, the dynamic linker's search path (LD_LIBRARY_PATH, ld.so.cache).
  Plugin p = Open(kGpuPluginFile);
  if (p.api == nullptr) {
    p.error = std::string(kGpuPluginFile) + " (the CUDA backend) is not in " + tried +
              " nor on the library path: " + p.error;
  }
  return p;
}

const Plugin& TheGpuPlugin() {
  static const Plugin plugin = Load();  // once per process; C++ makes it thread-safe
  return plugin;
}

}  // namespace

bool BuiltWithCuda() { return true; }

bool GpuPluginLoaded() { return loaded.load(); }

std::vector<GpuInfo> ListGpus(std::string* why_empty) {
  const Plugin& p = TheGpuPlugin();
  if (p.api == nullptr) {
    if (why_empty) *why_empty = p.error;
    return {};
  }
  return p.api->list_gpus(why_empty);
}

Result<std::unique_ptr<Backend<float>>> CreateGpuBackend(const CudaBackendOptions& options) {
  const Plugin& p = TheGpuPlugin();
  if (p.api == nullptr)
    return NotFoundError("gpu:" + std::to_string(options.device) + ": " + p.error);
  return p.api->create_backend(options);
}

}  // namespace towerps::kernels
